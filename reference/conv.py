"""Convolution (section 6.1, Appendix A): FILTERS[Rx][Ry][L][F], BIASES[F]."""

from array_api_compat import array_namespace

from pytest_gostcnn.model.layers import Layer

from ._window import crop, matmul, offsets, pad, padded_zeros, transposed_matmul, zeros
from .library import Array


def forward(layer: Layer, inputs: list[Array], weights: dict[str, Array]) -> list:
    padded = pad(inputs[0], layer)
    filters = weights["filters"]
    out = zeros(padded, (padded.shape[0], *layer.out_shapes[0]))
    out[...] = weights["biases"]
    for rx, ry, index in offsets(layer):
        out += matmul(padded[index], filters[rx, ry])
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
    for rx, ry, index in offsets(layer):
        in_residual[index] += matmul(out_residual, filters[rx, ry].T)
    return [crop(in_residual, layer)]


def gradient(layer: Layer, inputs: list[Array], out_residuals: list[Array]) -> dict[str, Array]:
    padded = pad(inputs[0], layer)
    out_residual = out_residuals[0]
    p = layer.params  # the channels as given: the error model stacks two residuals' (F)
    filters_grad = zeros(padded, (p["Rx"], p["Ry"], padded.shape[-1], out_residual.shape[-1]))
    for rx, ry, index in offsets(layer):
        # FILTERS_D[rx][ry] = IN(window)^T OUT_D, computed as its transpose: OpenBLAS runs
        # this long reduction faster with OUT_D^T as the left operand.
        filters_grad[rx, ry] = transposed_matmul(out_residual, padded[index]).T
    biases_grad = array_namespace(padded).sum(out_residual, axis=(0, 1, 2))
    return {"filters": filters_grad, "biases": biases_grad}
