"""Split (section 6.5, Appendix A): OUT1 = channels [0, L1), OUT2 = channels [L1, L).

Table rows name the outputs ``n.1`` and ``n.2``. Each is a copy, not a view of IN: a view
would keep all of IN alive for as long as either half is kept.
"""

from array_api_compat import array_namespace

from pytest_gostcnn.model.layers import Layer

from .library import Array


def forward(layer: Layer, inputs: list[Array], weights: dict[str, Array]) -> list:
    first = layer.params["L1"]
    xp = array_namespace(inputs[0])
    return [
        xp.asarray(inputs[0][..., :first], copy=True),
        xp.asarray(inputs[0][..., first:], copy=True),
    ]


def backward(
    layer: Layer,
    inputs: list[Array],
    outputs: list[Array],
    out_residuals: list[Array],
    weights: dict[str, Array],
) -> list:
    return [array_namespace(*out_residuals).concat(out_residuals, axis=3)]
