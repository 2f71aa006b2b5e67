"""Channel shuffle (section 6.9, Appendix A): channel l moves to f = l/(L/G) + G*(l%(L/G))."""

import numpy as np

from pytest_gostcnn.model.layers import Layer


def destinations(channels: int, groups: int) -> np.ndarray:
    """``f`` for every input channel ``l``, with Appendix A's integer division."""
    per_group = channels // groups
    channel = np.arange(channels)
    return channel // per_group + groups * (channel % per_group)


def forward(layer: Layer, inputs: list[np.ndarray], weights: dict[str, np.ndarray]) -> list:
    inp = inputs[0]
    out = np.empty_like(inp)
    out[..., destinations(inp.shape[3], layer.params["G"])] = inp
    return [out]


def backward(
    layer: Layer,
    inputs: list[np.ndarray],
    outputs: list[np.ndarray],
    out_residuals: list[np.ndarray],
    weights: dict[str, np.ndarray],
) -> list:
    out_residual = out_residuals[0]
    return [out_residual[..., destinations(out_residual.shape[3], layer.params["G"])]]
