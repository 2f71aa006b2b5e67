"""Rectification, ReLU (section 6.3, Appendix A): both steps decide on IN > 0."""

from array_api_compat import array_namespace

from pytest_gostcnn.machine.pool import elementwise
from pytest_gostcnn.model.layers import Layer

from .library import Array


def forward(layer: Layer, inputs: list[Array], weights: dict[str, Array]) -> list:
    return [elementwise(lambda x: array_namespace(x).where(x > 0, x, 0.0), inputs[0])]


def backward(
    layer: Layer,
    inputs: list[Array],
    outputs: list[Array],
    out_residuals: list[Array],
    weights: dict[str, Array],
) -> list:
    def chain(x, residual):
        return array_namespace(x).where(x > 0, residual, 0.0)

    return [elementwise(chain, inputs[0], out_residuals[0])]
