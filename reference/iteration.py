"""One float64 training iteration of a network through the reference, measured: its time,
its memory peak and the largest values it meets (``python -m pytest_gostcnn reference``)."""

from __future__ import annotations

import time
import tracemalloc

import numpy as np

from pytest_gostcnn.model import executor
from pytest_gostcnn.model.data import draw_input, draw_out_residual, draw_weights
from pytest_gostcnn.model.layers import Layer
from pytest_gostcnn.model.network import Network

from . import ReferenceKernels

FLOAT16_MAX = 65504.0  # the largest finite float16


class _Largest:
    """Kernels that pass every call to ``kernels`` and note each layer's largest forward
    value (``|x|``), by row number."""

    def __init__(self, kernels: object) -> None:
        self.kernels = kernels
        self.by_row: dict[int, float] = {}

    def __getattr__(self, name: str) -> object:
        return getattr(self.kernels, name)

    def forward(self, layer: Layer, inputs: list, weights: dict) -> list:
        outputs = self.kernels.forward(layer, inputs, weights)
        self.by_row[layer.number] = max(float(np.abs(out).max()) for out in outputs)
        return outputs


def training_iteration(network: Network, batch: int, seed: int, reading: str) -> str:
    """One training iteration of ``network`` at ``batch`` on weights drawn by ``reading``,
    described in one line; MemoryError when it does not fit as float64."""
    # NumPy reports its arrays to tracemalloc: the peak counts the weights, the draws, every
    # map the iteration keeps and its largest temporaries (not BLAS's own small buffers).
    tracemalloc.start()
    try:
        rng = np.random.default_rng(seed)
        weights = draw_weights(network, rng, reading)
        image = draw_input(network, batch, rng)
        out_residual = draw_out_residual(network, batch, rng)
        kernels = _Largest(ReferenceKernels())
        start = time.perf_counter()
        result = executor.train(network, kernels, weights, image, out_residual)
        seconds = time.perf_counter() - start
        peak_bytes = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    gradient = max(
        (float(np.abs(g).max()) for grads in result.gradients.values() for g in grads.values()),
        default=0.0,
    )
    over = [
        (row, position)
        for position, row in enumerate(kernels.by_row, 1)
        if kernels.by_row[row] > FLOAT16_MAX
    ]
    rows = len(network.layers)
    float16 = f"row {over[0][0]} (layer {over[0][1]} of {rows})" if over else "none"
    return (
        f"{network.letter} ({network.latin}): one float64 training iteration at B={batch}, "
        f"{reading} weights, "
        f"in {seconds:.2f} s, peak memory {peak_bytes / 2**30:.2f} GiB; "
        f"max |output| {np.abs(result.output).max():.3g}, "
        f"max |input residual| {np.abs(result.input_residual).max():.3g}, "
        f"largest forward value {max(kernels.by_row.values()):.3g}, "
        f"largest gradient {gradient:.3g}; first row past float16's 65504: {float16}"
    )
