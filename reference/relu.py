"""Rectification, ReLU (section 6.3, Appendix A): both steps decide on IN > 0."""

from array_api_compat import array_namespace

from pytest_gostcnn.model.layers import Layer

from .library import Array


def forward(layer: Layer, inputs: list[Array], weights: dict[str, Array]) -> list:
    return [array_namespace(inputs[0]).where(inputs[0] > 0, inputs[0], 0.0)]


def backward(
    layer: Layer,
    inputs: list[Array],
    outputs: list[Array],
    out_residuals: list[Array],
    weights: dict[str, Array],
) -> list:
    return [array_namespace(inputs[0]).where(inputs[0] > 0, out_residuals[0], 0.0)]
