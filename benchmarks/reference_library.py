"""The float64 reference's speed on each array library (``--gost-reference``), in one process.

For one network at one batch, alternating the libraries round after round, it times one
plain reference training iteration and one with the error model (a check's replay
iteration, float32's model) and prints each library's median seconds and its ratio to
NumPy's. NumPy runs as the suite runs it (BLAS on one thread, ``machine/pool.py``'s threads);
the others on their own threads::

    python benchmarks/reference_library.py                       # Г (G), B = 2: numpy, torch
    python benchmarks/reference_library.py --network Sh --batch 16 --libraries numpy,torch:cuda:0
"""

from __future__ import annotations

import argparse
import statistics
import time
from contextlib import nullcontext

import numpy as np

from pytest_gostcnn.conformance.harness import model_of
from pytest_gostcnn.machine.threads import one_blas_thread
from pytest_gostcnn.model import executor
from pytest_gostcnn.model.data import draw_input, draw_out_residual, draw_weights
from pytest_gostcnn.model.table_files import load_networks
from pytest_gostcnn.reference import ReferenceKernels
from pytest_gostcnn.reference.library import parse, to_numpy


def _synchronized(library, array) -> None:
    """Wait for the library's queued work (a GPU runs asynchronously): one value read back."""
    to_numpy(array[(0,) * array.ndim])


def iteration(network, batch: int, library, with_model: bool) -> float:
    """Seconds of one float64 training iteration on ``library`` (its data drawn before)."""
    rng = np.random.default_rng(0)
    weights = draw_weights(network, rng, "scaled")
    image, residual = draw_input(network, batch, rng), draw_out_residual(network, batch, rng)
    if with_model:
        kernels, representable = model_of("float32", library)
        on = {
            n: {k: kernels.bound(representable(a)) for k, a in ws.items()}
            for n, ws in weights.items()
        }
        image, residual = (
            kernels.bound(representable(image)),
            kernels.bound(representable(residual)),
        )
    else:
        kernels = ReferenceKernels()
        on = {n: {k: library.asarray(a) for k, a in ws.items()} for n, ws in weights.items()}
        image, residual = library.asarray(image), library.asarray(residual)
    with one_blas_thread() if library.is_numpy else nullcontext():
        start = time.perf_counter()
        result = executor.train(network, kernels, on, image, residual)
        output = result.output.value if with_model else result.output
        _synchronized(library, output)
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--network", default="G")
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--libraries", default="numpy,torch")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    network = load_networks()[args.network]
    libraries = [parse(text) for text in args.libraries.split(",")]
    for library in libraries:  # a first iteration each, untimed: imports, warm caches
        iteration(network, args.batch, library, with_model=False)
    for with_model in (False, True):
        seconds: dict[str, list[float]] = {str(library): [] for library in libraries}
        for _ in range(args.repeats):
            for library in libraries:
                seconds[str(library)].append(iteration(network, args.batch, library, with_model))
        kind = "error model (a check's replay)" if with_model else "plain reference"
        base = statistics.median(seconds[str(libraries[0])])
        for name, times in seconds.items():
            median = statistics.median(times)
            print(
                f"{network.latin} B={args.batch} {kind:32} {name:14} median {median:6.2f} s "
                f"of {args.repeats} ({', '.join(f'{t:.2f}' for t in times)}); "
                f"{base / median:.2f}x {libraries[0]}'s speed"
            )


if __name__ == "__main__":
    main()
