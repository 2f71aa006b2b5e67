"""Inference throughput of the ONNX Runtime backend against the PyTorch and NumPy backends on
the CPU, and the suite's harness overhead against ONNX Runtime's own loop of one session.

How to run it (onnx and onnxruntime from the ``[onnx]`` extra, PyTorch's CPU build)::

    pip install -e '.[onnx]' && pip install torch==2.13.0
    python benchmarks/compare_onnxruntime.py                  # the six analogs, B = 16
    python benchmarks/compare_onnxruntime.py --networks V,Sh --batch 2 --repeats 10

All three backends run in one process on the same tables, the same weights (the benchmark's,
``performance/training_data.benchmark_weights``) and the same image, float32, each on the
cell's cores. One round of a backend is what the suite times in inference: ``infer`` on an
image already handed over (``to_device``, untimed), ``synchronize`` and the delivery of the
output to the host (``performance/delivery.deliver``). The backends alternate round by
round, so that other load on the machine hits all alike; a rate is the best round's.

The harness overhead: the same ONNX Runtime session (the one the backend built for the
network and batch) run by ONNX Runtime's own loop, ``session.run(None, {input: image})``
on a host array, against the backend's round; the ratio is the backend's round over
ONNX Runtime's, best against best.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

from pytest_gostcnn.backends.numpy import NumpyBackend
from pytest_gostcnn.backends.onnxruntime import OnnxRuntimeBackend
from pytest_gostcnn.backends.onnxruntime.graph import INPUT
from pytest_gostcnn.backends.torch import TorchBackend
from pytest_gostcnn.machine.facts import cpu_model
from pytest_gostcnn.machine.threads import cell_cores
from pytest_gostcnn.model.complexity import inference_macs
from pytest_gostcnn.model.network import CYRILLIC, Network, network_key
from pytest_gostcnn.model.table_files import load_networks
from pytest_gostcnn.performance.delivery import deliver
from pytest_gostcnn.performance.training_data import benchmark_weights

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_torch import best_times  # noqa: E402  (the sides alternate, the best counts)


def backend_round(backend, network: Network, weights, image) -> Callable[[], np.ndarray]:
    """One timed inference round of the suite: infer, synchronize, deliver."""
    loaded = backend.load_weights(network, weights)
    given = backend.to_device(image)

    def run() -> np.ndarray:
        output = backend.infer(network, loaded, given)
        backend.synchronize()
        return deliver(backend, [output])[0]

    run.loaded = loaded  # the ONNX Runtime backend's sessions, for its own loop
    return run


def relative_rms(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64), b.astype(np.float64)
    return float(np.sqrt(np.mean((a - b) ** 2) / np.mean(b**2)))


def compare(network: Network, batch: int, seed: int, warmup: int, repeats: int) -> dict:
    rng = np.random.default_rng(seed)
    weights = benchmark_weights(network, rng)
    image = rng.uniform(-127, 128, (batch, *network.input_shape))
    rounds = {
        "onnxruntime": backend_round(OnnxRuntimeBackend("float32"), network, weights, image),
        "torch": backend_round(
            TorchBackend("float32", options={"device": "cpu"}), network, weights, image
        ),
        "numpy": backend_round(NumpyBackend("float32"), network, weights, image),
    }
    outputs = {name: run() for name, run in rounds.items()}  # builds the session too
    (session,) = rounds["onnxruntime"].loaded.sessions.values()
    host = image.astype(np.float32)
    steps = {**rounds, "ort loop": lambda: session.run(None, {INPUT: host})[0]}
    outputs["ort loop"] = steps["ort loop"]()
    best = best_times(steps, warmup, repeats)
    agree = max(relative_rms(outputs[name], outputs["numpy"]) for name in outputs)
    return {"best": best, "agree": agree}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--networks", default="M,G,V,S,R,Sh")
    parser.add_argument("--tables", default=None)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    networks = load_networks(args.tables)
    print(
        f"CPU: {cpu_model()}, {cell_cores()} cores; float32 inference, B = {args.batch}, "
        f"best of {args.repeats} rounds"
    )
    print(
        f"{'network':<8} {'ORT img/s':>10} {'torch':>8} {'NumPy':>8} {'ORT/torch':>10} "
        f"{'ORT/NumPy':>10} {'ORT GMAC/s':>11} {'harness':>8} {'agree':>8}"
    )
    for key in args.networks.split(","):
        network = networks[network_key(key)]
        found = compare(network, args.batch, args.seed, args.warmup, args.repeats)
        rate = {name: args.batch / seconds for name, seconds in found["best"].items()}
        gmacs = rate["onnxruntime"] * inference_macs(network) / 1e9
        harness = found["best"]["onnxruntime"] / found["best"]["ort loop"]
        letter = f"{CYRILLIC[network.latin]} ({network.latin})"
        print(
            f"{letter:<8} {rate['onnxruntime']:>10.1f} {rate['torch']:>8.1f} {rate['numpy']:>8.1f} "
            f"{rate['onnxruntime'] / rate['torch']:>10.2f} "
            f"{rate['onnxruntime'] / rate['numpy']:>10.2f} "
            f"{gmacs:>11.1f} {harness:>8.3f} {found['agree']:>8.1e}",
            flush=True,
        )


if __name__ == "__main__":
    main()
