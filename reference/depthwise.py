"""Depthwise convolution (section 6.6, Appendix A): FILTERS[Rx][Ry][L], BIASES[L].

standard.md §4 gap: Appendix A declares BIASES[F] and reads BIASES[f]; the layer has one bias per
channel l.
"""

import math

from array_api_compat import array_namespace

from pytest_gostcnn.machine import pool
from pytest_gostcnn.model.layers import Layer

from ._window import batch_parts, crop, offsets, pad, padded_zeros, zeros
from .library import Array


def forward(layer: Layer, inputs: list[Array], weights: dict[str, Array]) -> list:
    padded = pad(inputs[0], layer)
    filters = weights["filters"]
    out = zeros(padded, (padded.shape[0], *layer.out_shapes[0]))
    out[...] = weights["biases"]
    windows = list(offsets(layer))

    def part(span: slice) -> None:  # a part of the batch
        into, window_map = out[span], padded[span]
        for rx, ry, index in windows:
            into += window_map[index] * filters[rx, ry]

    pool.split(batch_parts(out, math.prod(out.shape) * len(windows)), part)
    return [out]


def backward(
    layer: Layer,
    inputs: list[Array],
    outputs: list[Array],
    out_residuals: list[Array],
    weights: dict[str, Array],
) -> list:
    out_residual = out_residuals[0]
    filters = weights["filters"]
    in_residual = padded_zeros(layer, out_residual)
    windows = list(offsets(layer))

    def part(span: slice) -> None:  # a part of the batch
        into, residual = in_residual[span], out_residual[span]
        for rx, ry, index in windows:
            into[index] += residual * filters[rx, ry]

    pool.split(batch_parts(out_residual, math.prod(out_residual.shape) * len(windows)), part)
    return [crop(in_residual, layer)]


def gradient(layer: Layer, inputs: list[Array], out_residuals: list[Array]) -> dict[str, Array]:
    padded = pad(inputs[0], layer)
    out_residual = out_residuals[0]
    xp = array_namespace(padded)
    filters_grad = zeros(padded, layer.weight_shapes["filters"])
    for rx, ry, index in offsets(layer):
        filters_grad[rx, ry] = xp.sum(padded[index] * out_residual, axis=(0, 1, 2))
    return {"filters": filters_grad, "biases": xp.sum(out_residual, axis=(0, 1, 2))}
