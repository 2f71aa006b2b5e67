"""Concatenation (section 6.4, Appendix A): channels of IN1, then those of IN2."""

import numpy as np

from pytest_gostcnn.model.layers import Layer


def forward(layer: Layer, inputs: list[np.ndarray], weights: dict[str, np.ndarray]) -> list:
    return [np.concatenate(inputs, axis=3)]


def backward(
    layer: Layer,
    inputs: list[np.ndarray],
    outputs: list[np.ndarray],
    out_residuals: list[np.ndarray],
    weights: dict[str, np.ndarray],
) -> list:
    first = layer.in_shapes[0][2]
    return [out_residuals[0][..., :first], out_residuals[0][..., first:]]
