"""The range of section 9.3's training data over one segment (docs/standard.md §7.8).

A training test runs its iterations in segments of K; each starts from the drawn weights
(``performance/training_data.py``, ``benchmark_weights``), on the cell's images (U(-127, 128)) and
an output residual from U(-1, 1) x r. This script runs one segment per network and batch
and prints, for each class of array (forward maps, backward residuals, weight gradients,
weights), the largest |value| and the low end of the non-zero ones, against the type::

    python benchmarks/segment_ranges.py                      # analogs, B = 1, 2; a few minutes
    python benchmarks/segment_ranges.py --dtype float16 --batches 1 -K 2 --scales 2^-32,2^-8
    python benchmarks/segment_ranges.py --tables canonical --batches 1 -K 2
    python benchmarks/segment_ranges.py --kernels reference --networks V,R --batches 2 -K 4

Kernels: the NumPy backend in float32 (default), or the float64 reference (``reference``).
float16 is emulated with float32 masters (docs/standard.md §6): every map, residual and
weight a step reads is rounded to float16, gradients and weights stay float32; a class's
figures are those of the values as computed, before rounding. ``--iterations n`` runs the
first n of the K iterations and extrapolates the drift linearly to K (an upper bound while
it is small: the steps are a random walk, which grows as sqrt).
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable

import numpy as np

from pytest_gostcnn.model import executor
from pytest_gostcnn.model.layers import Layer
from pytest_gostcnn.model.network import Network
from pytest_gostcnn.model.table_files import load_networks
from pytest_gostcnn.performance.images import ImageSet
from pytest_gostcnn.performance.training_data import TRAINING_DATA, benchmark_weights
from pytest_gostcnn.run.options import select_networks

# The suite's own segment lengths and residual scales (docs/standard.md §7.8).
RESIDUAL_SCALES = {dtype: scale for dtype, (_, scale) in TRAINING_DATA.items()}

CLASSES = ("maps", "residuals", "gradients", "weights")
# Where each class is held: float16 training keeps gradients and masters in float32.
HELD_IN = {
    "float32": dict.fromkeys(CLASSES, np.float32),
    "float16": {
        "maps": np.float16,
        "residuals": np.float16,
        "gradients": np.float32,
        "weights": np.float32,
    },
}
_BINADES = 2200  # frexp exponents of float64 lie in [-1073, 1024]
_OFFSET = 1100


class Range:
    """One class's values over a segment: largest |x|, smallest non-zero |x|, binades."""

    def __init__(self) -> None:
        self.largest = 0.0
        self.smallest = math.inf
        self.counts = np.zeros(_BINADES, dtype=np.int64)

    def note(self, array: np.ndarray) -> None:
        a = np.abs(np.asarray(array, dtype=np.float64)).ravel()
        if a.size == 0:
            return
        self.largest = max(self.largest, float(a.max()))
        nonzero = a[a > 0]
        if nonzero.size:
            self.smallest = min(self.smallest, float(nonzero.min()))
            # frexp: 2^(e-1) <= |x| < 2^e; the bin of a value is its e.
            self.counts += np.bincount(np.frexp(nonzero)[1] + _OFFSET, minlength=_BINADES)

    def quantile(self, q: float) -> float:
        """The lower edge of the binade holding the q-quantile of the non-zero |x|."""
        total = self.counts.sum()
        if total == 0:
            return math.nan
        e = int(np.searchsorted(np.cumsum(self.counts), q * total, side="left")) - _OFFSET
        return 2.0 ** (e - 1)

    def share_below(self, bound: float) -> float:
        """The share of non-zero |x| below ``bound`` (a power of two), from the binades."""
        total = self.counts.sum()
        if total == 0:
            return 0.0
        e = int(np.frexp(bound)[1]) - 1 + _OFFSET  # the bins wholly below bound
        return float(self.counts[:e].sum() / total)


class Watched:
    """Kernels that pass every step on and note each array it makes in its class; with
    ``half`` they round what float16 holds (docs/standard.md §6: float32 masters)."""

    def __init__(self, kernels: object, half: bool) -> None:
        self.kernels, self.half = kernels, half
        self.ranges = {name: Range() for name in CLASSES}
        self.visible: list[float] = []  # per update: share of master values it changed
        self.steps: dict[tuple, float] = {}  # first update: ||W_D / B|| / ||W|| by array

    def _held(self, arrays: list) -> list:
        return [_half(a) for a in arrays] if self.half else arrays

    def _read(self, weights: dict) -> dict:
        return {name: _half(w) for name, w in weights.items()} if self.half else weights

    def forward(self, layer: Layer, inputs: list, weights: dict) -> list:
        outputs = self.kernels.forward(layer, inputs, self._read(weights))
        for out in outputs:
            self.ranges["maps"].note(out)
        return self._held(outputs)

    def backward(
        self, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
    ) -> list:
        step = self.kernels.backward(layer, inputs, outputs, out_residuals, self._read(weights))
        for residual in step:
            self.ranges["residuals"].note(residual)
        return self._held(step)

    def gradient(self, layer: Layer, inputs: list, out_residuals: list) -> dict:
        grads = self.kernels.gradient(layer, inputs, out_residuals)
        for grad in grads.values():
            self.ranges["gradients"].note(grad)
        return grads

    def update(self, layer: Layer, weights: dict, grads: dict, batch: int) -> None:
        before = {name: np.array(w, dtype=np.float32) for name, w in weights.items()}
        self.kernels.update(layer, weights, grads, batch)
        changed = sum(
            int(np.count_nonzero(np.asarray(weights[n], dtype=np.float32) != w))
            for n, w in before.items()
        )
        self.visible.append(changed / sum(w.size for w in before.values()))
        for name, w in before.items():
            step = np.linalg.norm(np.asarray(weights[name], dtype=np.float64) - w)
            self.steps.setdefault((layer.number, name), float(step / np.linalg.norm(w)))
        for w in weights.values():
            self.ranges["weights"].note(w)


def _half(a: np.ndarray) -> np.ndarray:
    """``a`` as float16 holds it (overflow gives inf), back in ``a``'s type."""
    with np.errstate(over="ignore"):
        return a.astype(np.float16).astype(a.dtype)


def _kernels(name: str) -> tuple[object, type]:
    if name == "reference":
        from pytest_gostcnn.reference import ReferenceKernels

        return ReferenceKernels(), np.float64
    from pytest_gostcnn.backends.numpy import NumpyBackend

    return NumpyBackend(), np.float32


def segment(
    network: Network,
    batch: int,
    rounds: int,
    iterations: int,
    scale: float,
    dtype: str,
    kernels_name: str,
    seed: int,
) -> dict:
    """Run the first ``iterations`` of a segment of ``rounds``; return its figures."""
    kernels, compute = _kernels(kernels_name)
    watched = Watched(kernels, half=dtype == "float16")
    drawn = benchmark_weights(network, np.random.default_rng([seed, 0]))
    weights = {n: {k: w.astype(compute) for k, w in arrays.items()} for n, arrays in drawn.items()}
    images = ImageSet(network.input_shape, seed, 0)
    residual_rng = np.random.default_rng([seed, 0, 1])
    hold = _half if dtype == "float16" else (lambda a: a)
    largest = watched.ranges["maps"]
    started = time.perf_counter()
    for i in range(iterations):
        image = hold(images.batch(i * batch, batch).astype(compute))
        shape = (batch, *network.output_shape)
        out_residual = (residual_rng.uniform(-1.0, 1.0, size=shape) * scale).astype(compute)
        watched.ranges["residuals"].note(out_residual)
        before, largest.largest = largest.largest, 0.0
        with np.errstate(over="ignore", invalid="ignore"):
            executor.train(network, watched, weights, image, hold(out_residual))
        last, largest.largest = largest.largest, max(before, largest.largest)
    seconds = (time.perf_counter() - started) / iterations
    # The drift's effect: the last iteration's largest map against the same images' with
    # the drawn weights (the images alone make the largest map vary from batch to batch).
    start = {n: {k: w.astype(compute) for k, w in arrays.items()} for n, arrays in drawn.items()}
    watched_start = Watched(kernels, half=dtype == "float16")
    with np.errstate(over="ignore", invalid="ignore"):
        executor.infer(network, watched_start, start, image)
    drift = max(
        float(np.linalg.norm(weights[n][k] - w) / np.linalg.norm(w))
        for n, arrays in drawn.items()
        for k, w in arrays.items()
    )
    return {
        "ranges": watched.ranges,
        "visible": float(np.mean(watched.visible)),
        "steps": watched.steps,
        "drift": drift * rounds / iterations,
        "growth": last / watched_start.ranges["maps"].largest,
        "seconds": seconds,
        "weight_bytes": sum(w.size for arrays in drawn.values() for w in arrays.values()) * 4,
    }


def row(network: Network, batch: int, k: str, scale: float, dtype: str, figures: dict) -> str:
    ranges = figures["ranges"]
    r = ranges["residuals"]
    smallest = min(
        (ranges[c].smallest / float(np.finfo(HELD_IN[dtype][c]).smallest_normal), c)
        for c in CLASSES
    )
    over = max((ranges[c].largest / float(np.finfo(HELD_IN[dtype][c]).max), c) for c in CLASSES)
    steps = figures["steps"]
    widest = max(steps, key=steps.get)
    below = r.share_below(float(np.finfo(HELD_IN[dtype]["residuals"]).smallest_normal))
    return (
        f"| {network.letter} ({network.latin}) | {batch} | {dtype} | {k} | {_power(scale)} "
        f"| {ranges['maps'].largest:.3g} | {r.largest:.3g} | {ranges['gradients'].largest:.3g} "
        f"| {ranges['weights'].largest:.3g} | {over[0]:.1e} ({over[1]}) "
        f"| {r.quantile(0.01):.1e} / {r.quantile(0.5):.1e} | {100 * below:.2g} % "
        f"| {smallest[0]:.1e} ({smallest[1]}) "
        f"| {steps[widest]:.1e} ({widest[1]} {widest[0]}) / {min(steps.values()):.1e} "
        f"| {100 * figures['visible']:.3g} % "
        f"| {figures['drift']:.1e} | {figures['growth']:.4f} | {figures['seconds']:.2f} |"
    )


HEADER = (
    "| network | B | type | K (run) | r | max map | max residual | max gradient | max weight "
    "| max / type's max | residual p1 / median | residuals below normal "
    "| min non-zero / smallest normal | first step max / min | update visible | drift at K "
    "| map growth | s/iter |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def segment_rounds(dtype: str, batch: int) -> int:
    """K: the rounds of the suite's segment in ``dtype`` (the same at every batch)."""
    return TRAINING_DATA[dtype][0]


def _power(value: float) -> str:
    exponent = math.log2(value)
    return f"2^{exponent:g}" if exponent == int(exponent) else f"{value:.3g}"


def _scale(text: str) -> float:
    """``2^-20`` or a float."""
    if "^" in text:
        base, exponent = text.split("^")
        return float(base) ** float(exponent)
    return float(text)


def _list(convert: Callable) -> Callable:
    return lambda text: [convert(part) for part in text.split(",") if part]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tables",
        default="reconstructions",
        help="reconstructions (the six analogs, default), canonical, or both",
    )
    parser.add_argument("--networks", default=None, help="by letter, e.g. V,R (default all)")
    parser.add_argument("--batches", type=_list(int), default=[1, 2], help="default 1,2")
    parser.add_argument(
        "--rounds",
        "-K",
        type=int,
        default=None,
        help="K, the iterations of a segment (default: the suite's, "
        + ", ".join(f"{k} for {t}" for t, (k, _) in TRAINING_DATA.items())
        + ")",
    )
    parser.add_argument(
        "--iterations",
        type=int,
        default=64,
        help="run only the first N of the K and extrapolate the drift (default 64; 0: all K)",
    )
    parser.add_argument(
        "--scales",
        type=_list(_scale),
        default=None,
        help="residual scales r, e.g. 2^-20,1e-4 (default the type's)",
    )
    parser.add_argument("--dtype", choices=tuple(HELD_IN), default="float32")
    parser.add_argument("--kernels", choices=("numpy", "reference"), default="numpy")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    sets = ("reconstructions", "canonical") if args.tables == "both" else (args.tables,)
    print(f"kernels {args.kernels}, seed {args.seed}; every |value| over one segment\n")
    print(HEADER)
    for tables in sets:
        networks = load_networks(tables)
        if args.networks:
            networks = select_networks(networks, args.networks, "--networks", "--tables")
        for network in networks.values():
            for batch in args.batches:
                rounds = args.rounds or segment_rounds(args.dtype, batch)
                iterations = min(args.iterations or rounds, rounds)
                run = f"{rounds}" if iterations == rounds else f"{rounds} ({iterations})"
                for scale in args.scales or [RESIDUAL_SCALES[args.dtype]]:
                    figures = segment(
                        network,
                        batch,
                        rounds,
                        iterations,
                        scale,
                        args.dtype,
                        args.kernels,
                        args.seed,
                    )
                    print(row(network, batch, run, scale, args.dtype, figures), flush=True)


if __name__ == "__main__":
    main()
