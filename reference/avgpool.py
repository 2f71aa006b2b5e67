"""Average pooling (section 6.2, Appendix A).

standard.md §4: the sum over in-bounds positions is divided by Rx*Ry always, so padding
positions count in the divisor.
"""

import numpy as np

from pytest_gostcnn.model.layers import Layer

from ._window import crop, offsets, pad, padded_zeros


def forward(layer: Layer, inputs: list[np.ndarray], weights: dict[str, np.ndarray]) -> list:
    padded = pad(inputs[0], layer)
    out = np.zeros((padded.shape[0], *layer.out_shapes[0]), dtype=padded.dtype)
    for _, _, index in offsets(layer):
        out += padded[index]
    return [out / (layer.params["Rx"] * layer.params["Ry"])]


def backward(
    layer: Layer,
    inputs: list[np.ndarray],
    outputs: list[np.ndarray],
    out_residuals: list[np.ndarray],
    weights: dict[str, np.ndarray],
) -> list:
    share = out_residuals[0] / (layer.params["Rx"] * layer.params["Ry"])
    in_residual = padded_zeros(layer, share.shape[0], share.dtype)
    for _, _, index in offsets(layer):
        in_residual[index] += share
    return [crop(in_residual, layer)]
