"""Elementwise addition (section 6.7, Appendix A): OUT = IN1 + IN2; both IN_D = OUT_D."""

import numpy as np

from pytest_gostcnn.model.layers import Layer


def forward(layer: Layer, inputs: list[np.ndarray], weights: dict[str, np.ndarray]) -> list:
    return [inputs[0] + inputs[1]]


def backward(
    layer: Layer,
    inputs: list[np.ndarray],
    outputs: list[np.ndarray],
    out_residuals: list[np.ndarray],
    weights: dict[str, np.ndarray],
) -> list:
    return [out_residuals[0], out_residuals[0]]
