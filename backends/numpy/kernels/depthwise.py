"""Depthwise convolution (section 6.6): compiled loops over rows of the map (``compiled``),
each position's window visited once, split over the threads by rows."""

from __future__ import annotations

import numpy as np

from pytest_gostcnn.model.layers import Layer

from ..workspace import Workspace
from . import compiled
from ._shared import Geometry, _column_sums, _rows


def depthwise_forward(ws: Workspace, layer: Layer, inputs: list, weights: dict) -> list:
    x = compiled.contiguous(inputs[0])
    filters = compiled.contiguous(weights["filters"])
    biases = compiled.contiguous(weights["biases"])
    g = Geometry.of(layer)
    out = ws.result((x.shape[0], *layer.out_shapes[0]), x.dtype)
    px, py = g.pad

    def task(part: int, start: int, stop: int) -> None:
        compiled.depthwise_rows(x, filters, biases, out, g.stride, px, py, start, stop)

    ws.parallel(task, x.shape[0] * g.out_xy[0], x.shape[0] * layer.macs)
    return [out]


def depthwise_backward(
    ws: Workspace, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
) -> list:
    residual = compiled.contiguous(out_residuals[0])
    filters = compiled.contiguous(weights["filters"])
    g = Geometry.of(layer)
    batch = residual.shape[0]
    in_residual = ws.result((batch, *layer.in_shapes[0]), residual.dtype)
    px, py = g.pad

    def task(part: int, start: int, stop: int) -> None:
        compiled.depthwise_in_residual_rows(
            residual, filters, in_residual, g.stride, px, py, start, stop
        )

    ws.parallel(task, batch * g.in_xy[0], batch * layer.macs)
    return [in_residual]


def depthwise_gradient(ws: Workspace, layer: Layer, inputs: list, out_residuals: list) -> dict:
    x, residual = compiled.contiguous(inputs[0]), compiled.contiguous(out_residuals[0])
    g = Geometry.of(layer)
    shape = layer.weight_shapes["filters"]
    px, py = g.pad
    # Per part (a fixed split of the rows, whatever thread runs it) float64 sums, added in
    # the parts' order: the result does not depend on the threads' timing.
    sums = np.zeros((ws.threads, *shape), dtype=np.float64)

    def task(part: int, start: int, stop: int) -> None:
        row_sums = ws.scratch(f"row_sums{part}", shape, x.dtype)
        compiled.depthwise_gradient_rows(
            x, residual, sums[part], row_sums, g.stride, px, py, start, stop
        )

    ws.parallel(task, x.shape[0] * g.out_xy[0], x.shape[0] * layer.macs)
    return {
        "filters": sums.sum(axis=0).astype(x.dtype),
        "biases": _column_sums(ws, _rows(residual)),
    }
