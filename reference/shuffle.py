"""Channel shuffle (section 6.9, Appendix A): channel l moves to f = l/(L/G) + G*(l%(L/G))."""

from array_api_compat import array_namespace, device

from pytest_gostcnn.model.layers import Layer

from .library import Array


def destinations(a: Array, groups: int) -> Array:
    """``f`` for every channel ``l`` of the map ``a``, with Appendix A's integer division."""
    per_group = a.shape[3] // groups
    channel = array_namespace(a).arange(a.shape[3], device=device(a))
    return channel // per_group + groups * (channel % per_group)


def forward(layer: Layer, inputs: list[Array], weights: dict[str, Array]) -> list:
    inp = inputs[0]
    xp = array_namespace(inp)
    # OUT[f] = IN[l] where f is l's destination: read IN at the inverse permutation.
    sources = xp.argsort(destinations(inp, layer.params["G"]))
    return [xp.take(inp, sources, axis=3)]


def backward(
    layer: Layer,
    inputs: list[Array],
    outputs: list[Array],
    out_residuals: list[Array],
    weights: dict[str, Array],
) -> list:
    out_residual = out_residuals[0]
    to = destinations(out_residual, layer.params["G"])
    return [array_namespace(out_residual).take(out_residual, to, axis=3)]
