"""One float64 training iteration of a network through the reference, measured: its time,
its memory peak and the largest values it meets (``python -m pytest_gostcnn reference``),
the batch a slice at a time within a memory bound."""

from __future__ import annotations

import time
import tracemalloc

import numpy as np

from pytest_gostcnn.model import executor
from pytest_gostcnn.model.data import draw_input, draw_out_residual, draw_slices, draw_weights
from pytest_gostcnn.model.layers import Layer
from pytest_gostcnn.model.memory import batch_slices
from pytest_gostcnn.model.network import Network

from . import ReferenceKernels

FLOAT16_MAX = 65504.0  # the largest finite float16


class _Largest:
    """Kernels that pass every call to ``kernels`` and note each layer's largest forward
    value (``|x|``) over every slice of the batch, by row number."""

    def __init__(self, kernels: object) -> None:
        self.kernels = kernels
        self.by_row: dict[int, float] = {}

    def __getattr__(self, name: str) -> object:
        return getattr(self.kernels, name)

    def forward(self, layer: Layer, inputs: list, weights: dict) -> list:
        outputs = self.kernels.forward(layer, inputs, weights)
        largest = max(float(np.abs(out).max()) for out in outputs)
        self.by_row[layer.number] = max(largest, self.by_row.get(layer.number, 0.0))
        return outputs


def training_iteration(
    network: Network, batch: int, seed: int, reading: str, memory: int | None = None
) -> str:
    """One training iteration of ``network`` at ``batch`` on weights drawn by ``reading``,
    a slice of the batch at a time within ``memory`` bytes (``model/memory.py``; None: its
    default), described
    in one line; ``MemoryBoundError`` where one image does not fit, MemoryError where the
    host has less."""
    spans = batch_slices(network, batch, memory, error_model=False)
    # NumPy reports its arrays to tracemalloc: the peak counts the weights, the draws, every
    # map the iteration keeps and its largest temporaries (not BLAS's own small buffers).
    tracemalloc.start()
    try:
        rng = np.random.default_rng(seed)
        weights = draw_weights(network, rng, reading)
        images = draw_slices(draw_input, network, batch, rng)
        residuals = draw_slices(draw_out_residual, network, batch, rng)
        kernels = _Largest(ReferenceKernels())
        ends = {"output": 0.0, "input residual": 0.0}

        def take(span: slice, output: np.ndarray, input_residual: np.ndarray) -> None:
            for name, array in (("output", output), ("input residual", input_residual)):
                ends[name] = max(ends[name], float(np.abs(array).max()))

        start = time.perf_counter()
        gradients = executor.train_in_slices(
            network, kernels, weights, spans, lambda span: (images[span], residuals[span]), take
        )
        seconds = time.perf_counter() - start
        peak_bytes = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    gradient = max(
        (float(np.abs(g).max()) for grads in gradients.values() for g in grads.values()),
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
        f"in {seconds:.2f} s ({len(spans)} slice(s) of at most "
        f"{max(s.stop - s.start for s in spans)} image(s)), "
        f"peak memory {peak_bytes / 2**30:.2f} GiB; "
        f"max |output| {ends['output']:.3g}, max |input residual| {ends['input residual']:.3g}, "
        f"largest forward value {max(kernels.by_row.values()):.3g}, "
        f"largest gradient {gradient:.3g}; first row past float16's 65504: {float16}"
    )
