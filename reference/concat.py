"""Concatenation (section 6.4, Appendix A): channels of IN1, then those of IN2."""

from array_api_compat import array_namespace

from pytest_gostcnn.model.layers import Layer

from .library import Array


def forward(layer: Layer, inputs: list[Array], weights: dict[str, Array]) -> list:
    return [array_namespace(*inputs).concat(inputs, axis=3)]


def backward(
    layer: Layer,
    inputs: list[Array],
    outputs: list[Array],
    out_residuals: list[Array],
    weights: dict[str, Array],
) -> list:
    first = layer.in_shapes[0][2]
    return [out_residuals[0][..., :first], out_residuals[0][..., first:]]
