"""Convolution (section 6.1, Appendix A): FILTERS[Rx][Ry][L][F], BIASES[F]."""

import numpy as np

from pytest_gostcnn.model.layers import Layer

from ._window import crop, matmul, offsets, pad, padded_zeros, transposed_matmul


def forward(layer: Layer, inputs: list[np.ndarray], weights: dict[str, np.ndarray]) -> list:
    padded = pad(inputs[0], layer)
    filters = weights["filters"]
    out = np.empty((padded.shape[0], *layer.out_shapes[0]), dtype=padded.dtype)
    out[...] = weights["biases"]
    for rx, ry, index in offsets(layer):
        out += matmul(padded[index], filters[rx, ry])
    return [out]


def backward(
    layer: Layer,
    inputs: list[np.ndarray],
    outputs: list[np.ndarray],
    out_residuals: list[np.ndarray],
    weights: dict[str, np.ndarray],
) -> list:
    out_residual = out_residuals[0]
    filters = weights["filters"]
    in_residual = padded_zeros(layer, out_residual.shape[0], out_residual.dtype)
    for rx, ry, index in offsets(layer):
        in_residual[index] += matmul(out_residual, filters[rx, ry].T)
    return [crop(in_residual, layer)]


def gradient(
    layer: Layer, inputs: list[np.ndarray], out_residuals: list[np.ndarray]
) -> dict[str, np.ndarray]:
    padded = pad(inputs[0], layer)
    out_residual = out_residuals[0]
    filters_grad = np.empty(layer.weight_shapes["filters"], dtype=padded.dtype)
    for rx, ry, index in offsets(layer):
        # FILTERS_D[rx][ry] = IN(window)^T OUT_D, computed as its transpose: OpenBLAS runs
        # this long reduction faster with OUT_D^T as the left operand.
        filters_grad[rx, ry] = transposed_matmul(out_residual, padded[index]).T
    return {"filters": filters_grad, "biases": out_residual.sum(axis=(0, 1, 2))}
