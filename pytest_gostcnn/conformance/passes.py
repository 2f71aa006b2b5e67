"""The error model's variance passes through a layer's own reference kernels: a variance
is a sum of products where the value is, so the kernel that computes one computes the other
(docs/performance.md, "The suite's own work")."""

from __future__ import annotations

from array_api_compat import array_namespace

from pytest_gostcnn.model.layers import Layer
from pytest_gostcnn.reference._window import zeros
from pytest_gostcnn.reference.library import Array

# The layer types whose two variance passes are stacked into one product, with the axes of
# each weight array holding its input and its output channels (the type's reference module
# has ``forward_side_by_side`` and ``backward_side_by_side``). A variance pass through such
# a layer is a sum of products; two with different operands, stacked along the channels one
# sums over, are one product of twice the depth, and two sharing the map, stacked along the
# channels it produces, one product of twice the width: the same multiply-adds in half the
# calls, and longer GEMMs (docs/performance.md, "The suite's own work").
STACKED: dict[str, dict[str, tuple[int, int]]] = {
    "conv": {"filters": (2, 3)},
}


def forward_sum(layer: Layer, module, pairs) -> Array:
    """The sum over ``pairs`` (map, weights) of the layer's forward without its bias; for a
    ``STACKED`` type one forward of the maps and weights stacked along the input channels."""
    axes = STACKED.get(layer.type.name)
    if axes is None:
        total = None
        for x, w in pairs:
            out = module.forward(layer, [x], no_bias(layer, w))[0]
            total = out if total is None else total + out
        return total
    xp = array_namespace(pairs[0][0])
    stacked = {k: xp.concat([w[k] for _, w in pairs], axis=axes[k][0]) for k in axes}
    # The maps side by side as the type's kernel reads them, never copied into one.
    return module.forward_side_by_side(layer, [x for x, _ in pairs], no_bias(layer, stacked))


def backward_sum(layer: Layer, module, maps, pairs) -> Array:
    """The sum over ``pairs`` (output residual, weights) of the layer's backward; for a
    ``STACKED`` type one backward of both stacked along the output channels."""
    in_values, out_values = maps
    axes = STACKED.get(layer.type.name)
    if axes is None:
        total = None
        for r, w in pairs:
            out = module.backward(layer, in_values, out_values, [r], w)[0]
            total = out if total is None else total + out
        return total
    xp = array_namespace(pairs[0][0])
    stacked = {k: xp.concat([w[k] for _, w in pairs], axis=axes[k][1]) for k in axes}
    return module.backward_side_by_side(layer, [r for r, _ in pairs], stacked)


def gradient_pair(layer: Layer, module, x: Array, residuals: tuple[Array, Array]) -> tuple:
    """The layer's gradient of map ``x`` with each of two output residuals; for a ``STACKED``
    type one gradient of the residuals stacked along the output channels, cut in two."""
    axes = STACKED.get(layer.type.name)
    if axes is None:
        return tuple(module.gradient(layer, [x], [r]) for r in residuals)
    xp = array_namespace(x)
    both = module.gradient(layer, [x], [xp.concat(residuals, axis=-1)])
    width = residuals[0].shape[-1]
    axis_of = {k: out for k, (_, out) in axes.items()} | {"biases": 0}
    halves = ({}, {})
    for name, grad in both.items():
        axis = axis_of[name]
        for half, part in zip(halves, (slice(None, width), slice(width, None)), strict=True):
            half[name] = grad[(slice(None),) * axis + (part,)]
    return halves


def no_bias(layer: Layer, arrays: dict[str, Array]) -> dict[str, Array]:
    """Weights for a variance pass through a forward kernel: the bias is added separately."""
    like = next(iter(arrays.values()))
    return {**arrays, "biases": zeros(like, layer.weight_shapes["biases"])}
