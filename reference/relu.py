"""Rectification, ReLU (section 6.3, Appendix A): both steps decide on IN > 0."""

import numpy as np

from pytest_gostcnn.model.layers import Layer


def forward(layer: Layer, inputs: list[np.ndarray], weights: dict[str, np.ndarray]) -> list:
    return [np.where(inputs[0] > 0, inputs[0], 0.0)]


def backward(
    layer: Layer,
    inputs: list[np.ndarray],
    outputs: list[np.ndarray],
    out_residuals: list[np.ndarray],
    weights: dict[str, np.ndarray],
) -> list:
    return [np.where(inputs[0] > 0, out_residuals[0], 0.0)]
