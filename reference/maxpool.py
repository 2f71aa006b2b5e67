"""Max pooling (section 6.2, Appendix A).

standard.md §4: a window position outside the map counts as the value 0 (Appendix A sets
RES=0 there), so padding is 0, not -inf. Backward sends OUT_D to every in-bounds input
equal to the output (all tied maxima), accumulating over overlapping windows.
"""

from array_api_compat import array_namespace

from pytest_gostcnn.model.layers import Layer

from ._window import crop, offsets, pad
from .library import Array


def forward(layer: Layer, inputs: list[Array], weights: dict[str, Array]) -> list:
    padded = pad(inputs[0], layer)
    windows = (padded[index] for _, _, index in offsets(layer))
    xp = array_namespace(padded)
    out = next(windows)
    for window in windows:
        out = xp.maximum(out, window)
    return [out]


def backward(
    layer: Layer,
    inputs: list[Array],
    outputs: list[Array],
    out_residuals: list[Array],
    weights: dict[str, Array],
) -> list:
    padded = pad(inputs[0], layer)
    out, out_residual = outputs[0], out_residuals[0]
    xp = array_namespace(padded)
    in_residual = xp.zeros_like(padded)
    for _, _, index in offsets(layer):
        # Padding positions equal to the output get a share too, but crop() drops them:
        # Appendix A gives residual to in-bounds positions only.
        in_residual[index] += xp.where(padded[index] == out, out_residual, 0.0)
    return [crop(in_residual, layer)]
