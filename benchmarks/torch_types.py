"""The PyTorch backend in each data type against PyTorch's own loop of the same layers in
that type, on the CPU, in one process: what the suite's harness and the backend's choices
cost over plain PyTorch.

    python benchmarks/torch_types.py                                  # Sh, S, R at B 2
    python benchmarks/torch_types.py --networks R --batch 8 --repeats 5

The backend side is what the suite runs: ``executor.infer`` / ``executor.train`` with
``TorchBackend(dtype)``'s kernels (float16 and bfloat16 on float32 copies on a CPU whose
oneDNN has no unit for them; int8 in QNNPACK). PyTorch's side is ``compare_torch.py``'s
translation of the table, its parameters and maps converted to the type, on PyTorch's own
operators in that type (autograd for training); int8 has no such loop and is timed alone.
The sides alternate, ``--repeats`` timed iterations each after one untimed; a rate is the
best iteration's. It prints; it asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

# First: the backend sets OMP_WAIT_POLICY=PASSIVE before PyTorch loads (docs/backends.md).
from pytest_gostcnn.backends.torch import TorchBackend  # isort: skip

import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_torch import (  # noqa: E402
    best_times,
    draw,
    numpy_step,
    to_torch_map,
    torch_iteration,
    torch_parameters,
)

from pytest_gostcnn.conformance.fixed_point import calibrate  # noqa: E402
from pytest_gostcnn.machine.facts import cpu_model  # noqa: E402
from pytest_gostcnn.model import executor  # noqa: E402
from pytest_gostcnn.model.data import draw_input, draw_weights  # noqa: E402
from pytest_gostcnn.model.fixed_point import INTEGER_TYPES  # noqa: E402
from pytest_gostcnn.model.network import CYRILLIC, network_key  # noqa: E402
from pytest_gostcnn.model.table_files import load_networks  # noqa: E402

TYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
MODES = {"float32": ("inference", "training"), "float16": ("inference", "training")}


def pytorch_loop(network, mode: str, batch: int, dtype: torch.dtype):
    """PyTorch's own iteration of the table, in ``dtype``."""
    host, image, residual = draw(network, batch, seed=0)
    params = {
        number: {k: t.detach().to(dtype).requires_grad_() for k, t in arrays.items()}
        for number, arrays in torch_parameters(network, host).items()
    }
    residual_t = torch.from_numpy(residual).permute(0, 3, 1, 2).to(dtype)
    return torch_iteration(network, params, to_torch_map(image).to(dtype), residual_t, mode)


def int8_step(network, batch: int):
    """The backend's int8 inference, calibrated as the suite's benchmark calibrates."""
    backend = TorchBackend("int8", options={"device": "cpu"})
    rng = np.random.default_rng(0)
    data = calibrate(
        network, draw_weights(network, rng), draw_input(network, batch, rng), INTEGER_TYPES["int8"]
    )
    backend.use_scales(data.scales)
    weights = backend.load_weights(network, data.weights)
    image = backend.to_device(data.image)
    return lambda: executor.infer(network, backend, weights, image)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--networks", default="Sh,S,R")
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    networks = load_networks()
    print(
        f"{cpu_model()}, {torch.get_num_threads()} threads, torch {torch.__version__}, "
        f"B = {args.batch}, best of {args.repeats}"
    )
    print(
        f"{'network':9} {'mode':9} {'type':8} {'backend img/s':>13} {'PyTorch img/s':>13} "
        f"{'ratio':>6}"
    )
    for latin in args.networks.split(","):
        network = networks[network_key(latin)]
        name = f"{CYRILLIC.get(latin, latin)} ({latin})"
        for dtype, kind in TYPES.items():
            for mode in MODES.get(dtype, ("inference",)):
                backend = TorchBackend(dtype, options={"device": "cpu"})
                steps = {
                    "backend": numpy_step(backend, network, mode, args.batch, seed=0),
                    "pytorch": pytorch_loop(network, mode, args.batch, kind),
                }
                best = best_times(steps, warmup=1, repeats=args.repeats)
                rates = {side: args.batch / seconds for side, seconds in best.items()}
                print(
                    f"{name:9} {mode:9} {dtype:8} {rates['backend']:13.1f} "
                    f"{rates['pytorch']:13.1f} {rates['backend'] / rates['pytorch']:6.2f}"
                )
        step = int8_step(network, args.batch)
        step()
        seconds = min(_timed(step) for _ in range(args.repeats))
        print(
            f"{name:9} {'inference':9} {'int8':8} {args.batch / seconds:13.1f} {'-':>13} {'-':>6}"
        )


def _timed(step) -> float:
    start = time.perf_counter()
    step()
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
