"""Max and average pooling (section 6.2): window passes over the phase maps; max pooling's
backward step a compiled loop."""

from __future__ import annotations

import numpy as np

from pytest_gostcnn.model.layers import Layer

from ...common import is_global
from ..workspace import Workspace
from . import compiled
from ._shared import Geometry, Phases, _offsets, _window_pass

# Max pooling (section 6.2): padding counts as the value 0 (docs/standard.md §4; Phases'
# zeros); the backward step in a compiled loop over rows of IN_D (``compiled``).


def maxpool_forward(ws: Workspace, layer: Layer, inputs: list, weights: dict) -> list:
    # NumPy's window passes: a compiled loop was no faster
    # (docs/performance.md, "Why the NumPy kernels are shaped so").
    return [_reduce_windows(ws, layer, inputs[0], np.maximum)]


def maxpool_backward(
    ws: Workspace, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
) -> list:
    # docs/standard.md §4: OUT_D goes to every in-bounds input equal to the output (all
    # tied maxima), summed over overlapping windows; padding's share is nobody's.
    x, out = compiled.contiguous(inputs[0]), compiled.contiguous(outputs[0])
    residual = compiled.contiguous(out_residuals[0])
    g = Geometry.of(layer)
    in_residual = ws.result(x.shape, x.dtype)

    def task(part: int, start: int, stop: int) -> None:
        compiled.maxpool_in_residual_rows(
            x, out, residual, in_residual, *g.window, g.stride, *g.pad, start, stop
        )

    ws.parallel(task, x.shape[0] * g.in_xy[0], out.size * g.window[0] * g.window[1])
    return [in_residual]


def _reduce_windows(ws: Workspace, layer: Layer, x: np.ndarray, combine, scale=None):
    """Combine (max or add) the Rx*Ry window offsets of ``x``, then divide by ``scale``."""
    geometry = Geometry.of(layer)
    out = ws.result((x.shape[0], *layer.out_shapes[0]), x.dtype)

    def work(part: int, b0: int, b1: int, blocks: list[slice]) -> None:
        n = b1 - b0
        phases = Phases(ws, f"phases{part}", geometry, n, x)
        phases.split(x[b0:b1])
        for rows in blocks:
            target = out[b0:b1, rows]
            (rx, ry), *rest = _offsets(geometry)
            np.copyto(target, phases.window(rx, ry, n, rows))
            for rx, ry in rest:
                combine(target, phases.window(rx, ry, n, rows), out=target)
            if scale is not None:
                np.divide(target, scale, out=target)

    _window_pass(ws, x.shape[0], geometry, x.shape[3], work)
    return out


# Average pooling (section 6.2): the divisor is Rx*Ry always (docs/standard.md §4). -------


def avgpool_forward(ws: Workspace, layer: Layer, inputs: list, weights: dict) -> list:
    x = inputs[0]
    geometry = Geometry.of(layer)
    window = geometry.window[0] * geometry.window[1]
    if is_global(layer):
        return [np.sum(x, axis=(1, 2), keepdims=True) / window]
    return [_reduce_windows(ws, layer, x, np.add, scale=window)]


def avgpool_backward(
    ws: Workspace, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
) -> list:
    geometry = Geometry.of(layer)
    share = out_residuals[0] / (geometry.window[0] * geometry.window[1])
    batch = share.shape[0]
    in_residual = ws.result((batch, *layer.in_shapes[0]), share.dtype)
    if is_global(layer):
        in_residual[...] = share
        return [in_residual]
    all_rows = slice(0, geometry.out_xy[0])

    def work(part: int, b0: int, b1: int, blocks: list[slice]) -> None:
        n = b1 - b0
        phases = Phases(ws, f"phases{part}", geometry, n, share, scatter=True)
        phases.zero(n)
        for rx, ry in _offsets(geometry):
            target = phases.window(rx, ry, n, all_rows)
            if geometry.overlapping:
                np.add(target, share[b0:b1], out=target)
            else:
                np.copyto(target, share[b0:b1])
        phases.merge(in_residual[b0:b1])

    _window_pass(ws, batch, geometry, in_residual.shape[3], work)
    return [in_residual]
