"""Depthwise convolution (section 6.6): window passes over the phase maps, one multiply-add
per window offset."""

from __future__ import annotations

import numpy as np

from pytest_gostcnn.model.layers import Layer

from ..workspace import Workspace
from ._shared import (
    Geometry,
    Phases,
    _column_sums,
    _offsets,
    _rows,
    _temporary,
    _tiled,
    _window_pass,
)


def _depthwise_gather(
    ws: Workspace,
    source: np.ndarray,
    geometry: Geometry,
    filters: np.ndarray,
    biases: np.ndarray | None,
    out: np.ndarray,
) -> None:
    """``out`` = BIASES + the sum over offsets of ``source``'s windows * FILTERS[rx][ry]."""
    y_out, channels = geometry.out_xy[1], out.shape[3]
    tiled = _tiled(filters, y_out)
    bias_row = None if biases is None else _tiled(biases, y_out)
    offsets = _offsets(geometry)

    def work(part: int, b0: int, b1: int, blocks: list[slice]) -> None:
        n = b1 - b0
        phases = Phases(ws, f"phases{part}", geometry, n, source)
        phases.split(source[b0:b1])
        for rows in blocks:
            target = out[b0:b1, rows]
            product = _temporary(ws, part, target)
            (rx, ry), *rest = offsets
            np.multiply(phases.window(rx, ry, n, rows), tiled[rx, ry], out=target)
            for rx, ry in rest:
                np.multiply(phases.window(rx, ry, n, rows), tiled[rx, ry], out=product)
                np.add(target, product, out=target)
            if bias_row is not None:
                np.add(target, bias_row, out=target)

    _window_pass(ws, out.shape[0], geometry, channels, work)


def depthwise_forward(ws: Workspace, layer: Layer, inputs: list, weights: dict) -> list:
    x = inputs[0]
    out = ws.result((x.shape[0], *layer.out_shapes[0]), x.dtype)
    _depthwise_gather(ws, x, Geometry.of(layer), weights["filters"], weights["biases"], out)
    return [out]


def depthwise_backward(
    ws: Workspace, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
) -> list:
    out_residual, filters = out_residuals[0], weights["filters"]
    batch = out_residual.shape[0]
    geometry = Geometry.of(layer)
    in_residual = ws.result((batch, *layer.in_shapes[0]), out_residual.dtype)
    if geometry.stride == 1:
        # A gather over OUT_D with the window flipped (Geometry.adjoint): nothing accumulates.
        _depthwise_gather(
            ws, out_residual, geometry.adjoint(), filters[::-1, ::-1], None, in_residual
        )
        return [in_residual]
    tiled = _tiled(filters, geometry.out_xy[1])
    all_rows = [slice(0, geometry.out_xy[0])]

    def work(part: int, b0: int, b1: int, blocks: list[slice]) -> None:
        n = b1 - b0
        phases = Phases(ws, f"phases{part}", geometry, n, out_residual, scatter=True)
        phases.zero(n)
        residual = out_residual[b0:b1]
        product = _temporary(ws, part, residual)
        for rx, ry in _offsets(geometry):
            target = phases.window(rx, ry, n, all_rows[0])
            np.multiply(residual, tiled[rx, ry], out=product)
            np.add(target, product, out=target)
        phases.merge(in_residual[b0:b1])

    _window_pass(ws, batch, geometry, in_residual.shape[3], work)
    return [in_residual]


def depthwise_gradient(ws: Workspace, layer: Layer, inputs: list, out_residuals: list) -> dict:
    x, out_residual = inputs[0], out_residuals[0]
    geometry = Geometry.of(layer)
    (_, y_out), channels = geometry.out_xy, x.shape[3]
    offsets = _offsets(geometry)
    # Per thread and offset, sums over images and rows; the Y axis is summed at the end.
    sums = np.zeros((ws.threads, len(offsets), y_out * channels), dtype=x.dtype)

    def work(part: int, b0: int, b1: int, blocks: list[slice]) -> None:
        n = b1 - b0
        phases = Phases(ws, f"phases{part}", geometry, n, x)
        phases.split(x[b0:b1])
        for rows in blocks:
            residual = out_residual[b0:b1, rows]
            product = _temporary(ws, part, residual)
            for k, (rx, ry) in enumerate(offsets):
                np.multiply(phases.window(rx, ry, n, rows), residual, out=product)
                sums[part, k] += np.add.reduce(product.reshape(-1, y_out * channels), axis=0)

    _window_pass(ws, x.shape[0], geometry, channels, work)
    filters_grad = sums.sum(axis=0).reshape(len(offsets), y_out, channels).sum(axis=1)
    return {
        "filters": filters_grad.reshape(layer.weight_shapes["filters"]),
        "biases": _column_sums(ws, _rows(out_residual)),
    }
