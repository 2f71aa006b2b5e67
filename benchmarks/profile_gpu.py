"""Where the CuPy backend's time goes: seconds per (layer type, step) of one iteration.

Every kernel call of the executor is wrapped to synchronise the device before and after
it, so the table adds up to the iteration (plus the executor's own bookkeeping) but each
step is timed alone, without overlap. One timed iteration after one warm-up: the shares
are one sample. Run on a GPU machine::

    python benchmarks/profile_gpu.py --networks M,Sh --dtypes float16 --batch 64
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_torch import draw  # noqa: E402

from pytest_gostcnn import executor  # noqa: E402
from pytest_gostcnn.backends.cupy import CupyBackend  # noqa: E402
from pytest_gostcnn.model.network import CYRILLIC, network_key  # noqa: E402
from pytest_gostcnn.model.table_files import load_networks  # noqa: E402

STEPS = ("forward", "backward", "gradient", "update")


def profile(network, dtype: str, mode: str, batch: int, seed: int = 1) -> dict:
    backend = CupyBackend(dtype)
    host, image, residual = draw(network, batch, seed)
    weights = backend.load_weights(network, host)
    image, residual = backend.to_device(image), backend.to_device(residual)
    seconds: dict[str, float] = defaultdict(float)

    def timed(step, function):
        def call(layer, *args):
            backend.synchronize()
            start = time.perf_counter()
            result = function(layer, *args)
            backend.synchronize()
            seconds[f"{layer.type.name} {step}"] += time.perf_counter() - start
            return result

        return call

    def iteration():
        if mode == "inference":
            executor.infer(network, backend, weights, image)
        else:
            executor.train(network, backend, weights, image, residual)
        backend.synchronize()

    iteration()  # compile and warm
    for step in STEPS:  # the executor calls the backend's steps: shadow them on the object
        setattr(backend, step, timed(step, getattr(backend, step)))
    start = time.perf_counter()
    iteration()
    total = time.perf_counter() - start
    return {"total": total, "steps": dict(sorted(seconds.items(), key=lambda kv: -kv[1]))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--networks", default="M,Sh,S,R,G,V")
    parser.add_argument("--dtypes", default="float32,float16")
    parser.add_argument("--mode", default="training", choices=("training", "inference"))
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--top", type=int, default=6)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    networks = load_networks()
    report = []
    for key in (network_key(k.strip()) for k in args.networks.split(",")):
        for dtype in args.dtypes.split(","):
            row = profile(networks[key], dtype, args.mode, args.batch)
            row.update(network=key, dtype=dtype, mode=args.mode, batch=args.batch)
            report.append(row)
            top = ", ".join(
                f"{name} {share / row['total']:.0%}"
                for name, share in list(row["steps"].items())[: args.top]
            )
            print(
                f"{CYRILLIC[key]} {dtype} {args.mode} B={args.batch}: {row['total']:.3f} s; {top}"
            )
            if args.json is not None:
                args.json.write_text(json.dumps(report, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
