"""Convolution (section 6.1): im2col + GEMM (``im2col``: block by block while a block is in
the cache, or chunk by chunk where the weights are large; a 1x1 window's im2col is the map
itself, or at a stride the map subsampled), the backward pass by the adjoint im2col or by
col2im's scatter (``col2im``), whichever moves less memory; the weight gradient's products
in ``transposed_product``."""

from __future__ import annotations

import numpy as np

from pytest_gostcnn.model.layers import Layer

from ...common import is_pointwise
from ..workspace import Workspace
from . import compiled
from ._shared import Geometry, _column_sums, _rows
from .col2im import _col2im_backward
from .im2col import _blocked_gradient, _im2col_chunks, _im2col_gemm
from .transposed_product import _transposed_product


def _reads_the_map(layer: Layer) -> bool:
    """An unpadded 1x1 window, of any stride: its im2col is the map itself (``is_pointwise``)
    or, at a stride S > 1 (Р's projections), the map subsampled, and nothing more."""
    p = layer.params
    return (p["Rx"], p["Ry"], p["Px"], p["Py"]) == (1, 1, 0, 0)


def _subsampled(ws: Workspace, x: np.ndarray, layer: Layer) -> np.ndarray:
    """The map an unpadded 1x1 window reads: ``x`` itself at stride 1, else every S-th row
    and column of it copied into the workspace (a quarter of the map at S = 2), for one
    GEMM over all of its rows (docs/performance.md, "Why the NumPy kernels are shaped
    so")."""
    s = layer.params["S"]
    if s == 1:
        return x
    x_out, y_out = layer.out_shapes[0][:2]
    view = x[:, : s * x_out : s, : s * y_out : s]
    sub = ws.scratch("subsampled", view.shape, x.dtype)

    def copy(part: int, start: int, stop: int) -> None:
        np.copyto(sub[start:stop], view[start:stop])

    ws.parallel(copy, x.shape[0], sub.size)
    return sub


def _with_bias_row(ws: Workspace, matrix: np.ndarray, biases: np.ndarray) -> np.ndarray:
    stacked = ws.scratch("weights", (matrix.shape[0] + 1, matrix.shape[1]), matrix.dtype)
    stacked[:-1] = matrix
    stacked[-1] = biases
    return stacked


def conv_forward(ws: Workspace, layer: Layer, inputs: list, weights: dict) -> list:
    x = inputs[0]
    filters, biases = weights["filters"], weights["biases"]
    out = ws.result((x.shape[0], *layer.out_shapes[0]), x.dtype)
    matrix = filters.reshape(-1, filters.shape[-1])
    if _reads_the_map(layer):
        out_rows = _rows(out)
        ws.matmul(_rows(_subsampled(ws, x, layer)), matrix, out_rows)
        _add_bias(ws, out_rows, biases)
    else:
        stacked = _with_bias_row(ws, matrix, biases)
        _im2col_gemm(ws, x, Geometry.of(layer), stacked, out, with_ones=True)
    return [out]


def conv_backward(
    ws: Workspace, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
) -> list:
    out_residual, filters = out_residuals[0], weights["filters"]
    batch = out_residual.shape[0]
    geometry = Geometry.of(layer)
    if is_pointwise(layer):
        matrix = filters.reshape(filters.shape[2], filters.shape[3])
        in_residual = ws.result((batch, *layer.in_shapes[0]), out_residual.dtype)
        ws.matmul(_rows(out_residual), matrix.T, _rows(in_residual))
        return [in_residual]
    rx, ry, channels, features = filters.shape
    if geometry.stride == 1 and features <= channels:
        # IN_D is the convolution of OUT_D with FILTERS flipped in x and y, L and F swapped:
        # an im2col of OUT_D, Rx*Ry*F wide. Where F > L the GEMM of col2im, Rx*Ry*L wide,
        # moves less memory, as it does for every strided layer.
        flipped = ws.scratch("weights", (rx, ry, features, channels), filters.dtype)
        np.copyto(flipped, filters[::-1, ::-1].transpose(0, 1, 3, 2))
        in_residual = ws.result((batch, *layer.in_shapes[0]), out_residual.dtype)
        _im2col_gemm(
            ws,
            out_residual,
            geometry.adjoint(),
            flipped.reshape(-1, channels),
            in_residual,
            with_ones=False,
        )
        return [in_residual]
    return [_col2im_backward(ws, layer, geometry, out_residual, filters)]


def conv_gradient(ws: Workspace, layer: Layer, inputs: list, out_residuals: list) -> dict:
    x, out_residual = inputs[0], out_residuals[0]
    rx, ry, channels, features = layer.weight_shapes["filters"]
    if _reads_the_map(layer):
        residual_rows = _rows(out_residual)
        filters_grad = _transposed_product(ws, _rows(_subsampled(ws, x, layer)), residual_rows)
        filters_grad = filters_grad.reshape(rx, ry, channels, features)
        return {"filters": filters_grad, "biases": _column_sums(ws, residual_rows)}
    depth = rx * ry * channels
    geometry = Geometry.of(layer)
    # [im2col(IN) | 1]^T @ OUT_D holds FILTERS_D over BIASES_D; summed block by block (each
    # thread its own sum, added in the threads' order) or chunk by chunk.
    if (depth + 1) * features * x.itemsize <= ws.blocked_weights_bytes:
        total = _blocked_gradient(ws, x, geometry, out_residual, depth + 1)
        return {
            "filters": total[:depth].reshape(rx, ry, channels, features),
            "biases": total[depth].copy(),
        }
    total = np.zeros((depth + 1, features), dtype=x.dtype)
    partial = np.empty_like(total)
    for c0, n, rows, cols in _im2col_chunks(ws, x, geometry, with_ones=True):
        _transposed_product(ws, cols, _rows(out_residual[c0 : c0 + n, rows]), out=partial)
        np.add(total, partial, out=total)
    return {
        "filters": total[:depth].reshape(rx, ry, channels, features),
        "biases": total[depth].copy(),
    }


def _add_bias(ws: Workspace, rows: np.ndarray, biases: np.ndarray) -> None:
    """``rows`` [N][F] (C-ordered) += BIASES, in place, split over the threads."""
    biases = compiled.contiguous(biases)

    def task(part: int, start: int, stop: int) -> None:
        compiled.add_to_rows(rows, biases, start, stop)

    ws.parallel(task, rows.shape[0], rows.size)
