"""Max pooling (section 6.2, Appendix A).

standard.md §4: a window position outside the map counts as the value 0 (Appendix A sets
RES=0 there), so padding is 0, not -inf. Backward sends OUT_D to every in-bounds input
equal to the output (all tied maxima), accumulating over overlapping windows.
"""

import math

from array_api_compat import array_namespace

from pytest_gostcnn.machine import pool
from pytest_gostcnn.model.layers import Layer

from ._window import batch_parts, crop, offsets, pad
from .library import Array


def forward(layer: Layer, inputs: list[Array], weights: dict[str, Array]) -> list:
    padded = pad(inputs[0], layer)
    windows = [padded[index] for _, _, index in offsets(layer)]
    xp = array_namespace(padded)
    if len(windows) == 1:  # a 1x1 window: a copy, never a view of the input
        return [xp.asarray(windows[0], copy=True)]
    out = xp.maximum(windows[0], windows[1])
    for window in windows[2:]:
        out = xp.maximum(out, window)
    return [out]


def backward(
    layer: Layer,
    inputs: list[Array],
    outputs: list[Array],
    out_residuals: list[Array],
    weights: dict[str, Array],
) -> list:
    return route(layer, inputs[0], outputs[0], out_residuals[:1])


def route(layer: Layer, inp: Array, out: Array, residuals: list[Array]) -> list[Array]:
    """Each of ``residuals`` (maps shaped like OUT) sent to its windows' maxima as backward
    sends OUT_D, the maxima found once for all of them; on NumPy a part of the batch on each
    of the pool's threads (each image's sums as one thread's)."""
    padded = pad(inp, layer)
    xp = array_namespace(padded)
    routed = [xp.zeros_like(padded) for _ in residuals]
    windows = list(offsets(layer))

    def part(span: slice) -> None:
        window_map, maxima = padded[span], out[span]
        for _, _, index in windows:
            # Padding positions equal to the output get a share too, but crop() drops them:
            # Appendix A gives residual to in-bounds positions only.
            at_maximum = window_map[index] == maxima
            for into, residual in zip(routed, residuals, strict=True):
                into[span][index] += xp.where(at_maximum, residual[span], 0.0)

    pool.split(batch_parts(padded, math.prod(padded.shape) * len(windows) * len(residuals)), part)
    return [crop(r, layer) for r in routed]
