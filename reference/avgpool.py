"""Average pooling (section 6.2, Appendix A).

standard.md §4: the sum over in-bounds positions is divided by Rx*Ry always, so padding
positions count in the divisor.
"""

from pytest_gostcnn.model.layers import Layer

from ._window import crop, offsets, pad, padded_zeros, zeros
from .library import Array


def forward(layer: Layer, inputs: list[Array], weights: dict[str, Array]) -> list:
    padded = pad(inputs[0], layer)
    out = zeros(padded, (padded.shape[0], *layer.out_shapes[0]))
    for _, _, index in offsets(layer):
        out += padded[index]
    return [out / (layer.params["Rx"] * layer.params["Ry"])]


def backward(
    layer: Layer,
    inputs: list[Array],
    outputs: list[Array],
    out_residuals: list[Array],
    weights: dict[str, Array],
) -> list:
    share = out_residuals[0] / (layer.params["Rx"] * layer.params["Ry"])
    in_residual = padded_zeros(layer, share)
    for _, _, index in offsets(layer):
        in_residual[index] += share
    return [crop(in_residual, layer)]
