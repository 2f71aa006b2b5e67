"""Fully connected (section 6.8): one GEMM on the map reordered to (l, x, y)."""

from __future__ import annotations

import numpy as np

from pytest_gostcnn.model.layers import Layer

from ...common import from_lxy, lxy
from ..workspace import Workspace


def _map_lxy(ws: Workspace, x: np.ndarray) -> np.ndarray:
    """``lxy`` of IN, reordered in the workspace."""

    def copy(view: np.ndarray) -> np.ndarray:
        reordered = ws.scratch("fc", view.shape, view.dtype)
        np.copyto(reordered, view)
        return reordered

    return lxy(x, copy)


def fc_forward(ws: Workspace, layer: Layer, inputs: list, weights: dict) -> list:
    x, matrix = inputs[0], weights["weights"]
    matrix = matrix.reshape(matrix.shape[0], -1)
    out = ws.result((x.shape[0], 1, 1, matrix.shape[0]), x.dtype)
    out_rows = out.reshape(x.shape[0], -1)
    ws.matmul(_map_lxy(ws, x), matrix.T, out_rows)
    np.add(out_rows, weights["biases"], out=out_rows)
    return [out]


def fc_backward(
    ws: Workspace, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
) -> list:
    residual, matrix = out_residuals[0], weights["weights"]
    batch = residual.shape[0]
    rows = ws.matmul(residual.reshape(batch, -1), matrix.reshape(matrix.shape[0], -1))
    in_residual = ws.result((batch, *layer.in_shapes[0]), rows.dtype)
    np.copyto(in_residual, from_lxy(rows, layer))
    return [in_residual]


def fc_gradient(ws: Workspace, layer: Layer, inputs: list, out_residuals: list) -> dict:
    residual = out_residuals[0].reshape(out_residuals[0].shape[0], -1)
    map_lxy = _map_lxy(ws, inputs[0])
    # A result, not a fresh array: WEIGHTS_D is as large as WEIGHTS (411 MB for the
    # canonical VGG-16's first FC layer), and fresh it faults in every page each iteration.
    weights_grad = ws.result((residual.shape[1], map_lxy.shape[1]), map_lxy.dtype)
    ws.matmul(residual.T, map_lxy, weights_grad)
    return {
        "weights": weights_grad.reshape(layer.weight_shapes["weights"]),
        "biases": residual.sum(axis=0),
    }
