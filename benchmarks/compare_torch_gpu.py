"""Throughput of the CuPy backend against PyTorch + cuDNN on one GPU, in one process.

Needs a CUDA GPU with CuPy and PyTorch (CUDA build) installed; neither is a dependency of
the project. ``benchmarks/gpu_check.sh`` runs it; by hand::

    python benchmarks/compare_torch_gpu.py --json out.json            # the issue's targets
    python benchmarks/compare_torch_gpu.py --networks R,Sh --dtypes float16 --repeats 3

Both sides run the same tables (``load_networks``), the same weights and the same batch,
channels last. The table-to-torch translation (docs/standard.md §4 semantics: max pooling
pads with zeros, average pooling divides by Rx*Ry, FC reads the map in (l, x, y) order) and
the draws are imported from ``benchmarks/compare_torch.py``, the CPU comparison, and moved to
the GPU here. Data types: float32 (TF32 off on both sides), tf32 (inference: cuBLAS
FAST_TF32 against torch with ``allow_tf32``), float16 (float16 parameters and maps on both
sides, float32 accumulation). Training is forward, backward from a fixed output residual
(the network input's residual too), weight gradients and the standard's update
``W += W_D / B``.

Every measurement is ``--repeats`` timed iterations per side after ``--warmup`` untimed
ones, each ending with a device synchronisation, the sides alternating; the table gives the
best iteration of each. The target of the issue is a ratio (CuPy / PyTorch images per
second) of at least 0.7 at batch 256 (training) and 1024 (inference). Rows are written to
``--json`` as they finish, so a run stopped by a timeout keeps what it measured; the report
holds the device's estimated peak per data type (``CupyBackend.peak()``), from which
``benchmarks/gpu_table.py`` gives each row's ОРП (section 9.5).
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import cupy
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_torch import (  # noqa: E402
    best_times,
    draw,
    to_torch_map,
    torch_forward,
    torch_iteration,
    torch_parameters,
)

from pytest_gostcnn import executor  # noqa: E402
from pytest_gostcnn.backends.cupy import CupyBackend  # noqa: E402
from pytest_gostcnn.model.network import CYRILLIC, Network, network_key  # noqa: E402
from pytest_gostcnn.model.table_files import load_networks  # noqa: E402

TARGET = 0.7
TORCH_DTYPES = {"float32": torch.float32, "tf32": torch.float32, "float16": torch.float16}


_DRAWN: dict[tuple[str, int, int], tuple[dict, np.ndarray, np.ndarray]] = {}


def draws(network: Network, batch: int, seed: int) -> tuple[dict, np.ndarray, np.ndarray]:
    """``compare_torch.draw``, once per network and batch for every data type and side."""
    key = (network.latin, batch, seed)
    if key not in _DRAWN:
        _DRAWN.clear()  # one network's arrays at a time: 0.6 GB for В at batch 1024
        _DRAWN[key] = draw(network, batch, seed)
    return _DRAWN[key]


def ours(network: Network, mode: str, dtype: str, batch: int, seed: int) -> Callable[[], None]:
    backend = CupyBackend(dtype)
    host, image, residual = draws(network, batch, seed)
    weights = backend.load_weights(network, host)
    image, residual = backend.to_device(image), backend.to_device(residual)

    def infer() -> None:
        executor.infer(network, backend, weights, image)
        backend.synchronize()

    def train() -> None:
        executor.train(network, backend, weights, image, residual)
        backend.synchronize()

    return infer if mode == "inference" else train


def theirs(network: Network, mode: str, dtype: str, batch: int, seed: int) -> Callable[[], None]:
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    torch.backends.cudnn.allow_tf32 = dtype == "tf32"
    kind = TORCH_DTYPES[dtype]
    host, image, residual = draws(network, batch, seed)
    params = {
        number: {k: t.detach().to("cuda", kind).requires_grad_() for k, t in arrays.items()}
        for number, arrays in torch_parameters(network, host).items()
    }
    image_t = to_torch_map(image).to("cuda", kind)  # channels last, as on the CPU
    residual_t = torch.from_numpy(residual).permute(0, 3, 1, 2).to("cuda", kind)
    return torch_iteration(network, params, image_t, residual_t, mode, torch.cuda.synchronize)


def agreement(network: Network, seed: int) -> float:
    """Relative RMS difference of the float32 inference outputs at batch 2."""
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    host, image, _ = draw(network, 2, seed)
    backend = CupyBackend("float32")
    mine = backend.to_host(
        executor.infer(
            network, backend, backend.load_weights(network, host), backend.to_device(image)
        )
    )
    params = {
        number: {k: t.detach().cuda() for k, t in arrays.items()}
        for number, arrays in torch_parameters(network, host).items()
    }
    with torch.no_grad():
        other = torch_forward(network, params, to_torch_map(image).cuda())
    other = other.permute(0, 2, 3, 1).cpu().numpy()
    return float(np.sqrt(np.mean((mine - other) ** 2) / np.mean(other**2)))


def release() -> None:
    gc.collect()
    cupy.get_default_memory_pool().free_all_blocks()
    torch.cuda.empty_cache()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--networks", default="Sh,M,S,R,G,V", help="smallest first")
    parser.add_argument("--modes", default="inference,training")
    parser.add_argument("--dtypes", default="float32,tf32,float16")
    parser.add_argument("--training-batch", type=int, default=256)
    parser.add_argument("--inference-batch", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, default=None, help="write the rows here")
    args = parser.parse_args()

    networks = load_networks()
    keys = [network_key(k.strip()) for k in args.networks.split(",")]
    probe = CupyBackend("float32")
    report = {
        "device": probe.device(),
        "system": probe.system(),
        "torch": torch.__version__,
        "cudnn": torch.backends.cudnn.version(),
        "target_ratio": TARGET,
        "repeats": args.repeats,
        "warmup": args.warmup,
        "rows": [],
        "agreement": {},
        "peak_macs_per_second": {},
    }
    for dtype in (d.strip() for d in args.dtypes.split(",")):
        peak = CupyBackend(dtype).peak()
        report["peak_macs_per_second"][dtype] = peak.macs_per_second if peak else None

    def save() -> None:
        if args.json is not None:
            args.json.write_text(json.dumps(report, indent=2), encoding="utf-8")

    print(f"{report['device']}; PyTorch {torch.__version__}, cuDNN {report['cudnn']}")
    print(
        f"{'network':8s} {'mode':9s} {'dtype':8s} {'B':>5s} {'CuPy img/s':>11s} "
        f"{'torch img/s':>11s} {'ratio':>6s}"
    )
    for key in keys:
        network = networks[key]
        try:
            report["agreement"][key] = agreement(network, args.seed)
        except Exception as exc:  # a failure is a row of the report, not the end of the run
            report["agreement"][key] = f"{type(exc).__name__}: {exc}"
        release()
        for mode in (m.strip() for m in args.modes.split(",")):
            batch = args.training_batch if mode == "training" else args.inference_batch
            for dtype in (d.strip() for d in args.dtypes.split(",")):
                if mode == "training" and dtype == "tf32":
                    continue  # docs/standard.md §8: training in float32 or float16 only
                row = {"network": key, "mode": mode, "dtype": dtype, "batch": batch}
                steps = None
                try:
                    steps = {
                        "cupy": ours(network, mode, dtype, batch, args.seed),
                        "torch": theirs(network, mode, dtype, batch, args.seed),
                    }
                    start = time.perf_counter()
                    best = best_times(steps, args.warmup, args.repeats)
                    rate = {side: batch / seconds for side, seconds in best.items()}
                    row.update(
                        cupy_images_per_second=rate["cupy"],
                        torch_images_per_second=rate["torch"],
                        ratio=rate["cupy"] / rate["torch"],
                        meets_target=rate["cupy"] / rate["torch"] >= TARGET,
                        wall_seconds=time.perf_counter() - start,
                    )
                    print(
                        f"{CYRILLIC[key] + ' (' + key + ')':8s} {mode:9s} {dtype:8s} {batch:5d} "
                        f"{rate['cupy']:11.1f} {rate['torch']:11.1f} {row['ratio']:6.2f}",
                        flush=True,
                    )
                except Exception as exc:
                    row["error"] = f"{type(exc).__name__}: {exc}"
                    print(f"{key:8s} {mode:9s} {dtype:8s} {batch:5d} error: {row['error']}")
                del steps
                release()
                report["rows"].append(row)
                save()
    print("agreement (relative RMS difference of float32 inference outputs, batch 2):")
    print(
        "  "
        + ", ".join(
            f"{k} {v:.1e}" if isinstance(v, float) else f"{k} {v}"
            for k, v in report["agreement"].items()
        )
    )
    save()


if __name__ == "__main__":
    main()
