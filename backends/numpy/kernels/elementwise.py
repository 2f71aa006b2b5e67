"""The layers that move or add elements: ReLU (section 6.3, compiled loops) and elementwise
addition (6.7) in flat cache-sized blocks, concat (6.4) and split (6.5) as copies split
over the threads by images, shuffle (6.9) a compiled loop."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from pytest_gostcnn.model.layers import Layer

from ...common import channel_parts, eltwise_in_residuals, shuffle
from ..workspace import Workspace
from . import compiled
from ._shared import _flat_pass

# ReLU (section 6.3), elementwise addition (6.7): flat passes in cache-sized blocks. ------


def relu_forward(ws: Workspace, layer: Layer, inputs: list, weights: dict) -> list:
    # docs/standard.md §4: IN > 0 ? IN : 0, exactly (a NaN input gives 0).
    x = compiled.contiguous(inputs[0]).reshape(-1)
    out = ws.result(x.shape, x.dtype)
    _flat_pass(ws, x.size, lambda part, s: compiled.relu_span(x, out, s.start, s.stop))
    return [out.reshape(inputs[0].shape)]


def relu_backward(
    ws: Workspace, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
) -> list:
    # docs/standard.md §4: decided on IN, not OUT.
    x = compiled.contiguous(inputs[0]).reshape(-1)
    residual = compiled.contiguous(out_residuals[0]).reshape(-1)
    in_residual = ws.result(x.shape, residual.dtype)
    _flat_pass(
        ws,
        x.size,
        lambda part, s: compiled.relu_in_residual_span(x, residual, in_residual, s.start, s.stop),
    )
    return [in_residual.reshape(inputs[0].shape)]


def eltwise_forward(ws: Workspace, layer: Layer, inputs: list, weights: dict) -> list:
    a, b = inputs[0].reshape(-1), inputs[1].reshape(-1)
    out = ws.result(a.shape, np.result_type(a, b))
    _flat_pass(ws, a.size, lambda part, s: np.add(a[s], b[s], out=out[s]))
    return [out.reshape(inputs[0].shape)]


def eltwise_backward(
    ws: Workspace, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
) -> list:
    return eltwise_in_residuals(out_residuals)


# Concat (6.4), split (6.5): copies split over the threads by images; shuffle (6.9). ------


def _by_images(ws: Workspace, batch: int, size: int, copy: Callable[[slice], None]) -> None:
    ws.parallel(lambda part, start, stop: copy(slice(start, stop)), batch, size)


def _join(ws: Workspace, first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Channels of ``first``, then those of ``second``, in a fresh map."""
    channels = first.shape[3]
    out = ws.result((*first.shape[:3], channels + second.shape[3]), first.dtype)

    def copy(b: slice) -> None:
        out[b, ..., :channels] = first[b]
        out[b, ..., channels:] = second[b]

    _by_images(ws, out.shape[0], out.size, copy)
    return out


def concat_forward(ws: Workspace, layer: Layer, inputs: list, weights: dict) -> list:
    return [_join(ws, inputs[0], inputs[1])]


def concat_backward(
    ws: Workspace, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
) -> list:
    return list(channel_parts(out_residuals[0], layer.in_shapes[0][2]))


def split_forward(ws: Workspace, layer: Layer, inputs: list, weights: dict) -> list:
    # Copies, not views of IN (reference/split.py says why).
    x = inputs[0]
    views = channel_parts(x, layer.params["L1"])
    parts = [ws.result(view.shape, x.dtype) for view in views]

    def copy(b: slice) -> None:
        parts[0][b] = views[0][b]
        parts[1][b] = views[1][b]

    _by_images(ws, x.shape[0], x.size, copy)
    return parts


def split_backward(
    ws: Workspace, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
) -> list:
    return [_join(ws, out_residuals[0], out_residuals[1])]


def _regrouped(ws: Workspace) -> Callable[[np.ndarray], np.ndarray]:
    """``shuffle``'s copy of the regrouped channels (its [..][L/rows][rows] view of a map): a
    result, filled by a compiled loop split over the threads by positions: NumPy's copy of
    the strided view is slower (docs/performance.md, "Why the NumPy kernels are shaped so")."""

    def copy(grid: np.ndarray) -> np.ndarray:
        *lead, columns, rows = grid.shape
        source = compiled.contiguous(grid.swapaxes(-1, -2)).reshape(-1, columns * rows)
        out = ws.result((*lead, columns * rows), grid.dtype)
        target = out.reshape(source.shape)
        ws.parallel(
            lambda part, start, stop: compiled.regroup_rows(source, target, rows, start, stop),
            source.shape[0],
            out.size,
        )
        return out

    return copy


def shuffle_forward(ws: Workspace, layer: Layer, inputs: list, weights: dict) -> list:
    return [shuffle(layer, inputs[0], _regrouped(ws))]


def shuffle_backward(
    ws: Workspace, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
) -> list:
    return [shuffle(layer, out_residuals[0], _regrouped(ws), inverse=True)]
