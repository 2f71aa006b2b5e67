"""Elementwise addition (section 6.7, Appendix A): OUT = IN1 + IN2; both IN_D = OUT_D."""

from pytest_gostcnn.model.layers import Layer

from .library import Array


def forward(layer: Layer, inputs: list[Array], weights: dict[str, Array]) -> list:
    return [inputs[0] + inputs[1]]


def backward(
    layer: Layer,
    inputs: list[Array],
    outputs: list[Array],
    out_residuals: list[Array],
    weights: dict[str, Array],
) -> list:
    return [out_residuals[0], out_residuals[0]]
