"""Fully connected layer (section 6.8, Appendix A): WEIGHTS[F][L][X][Y], BIASES[F].

standard.md §4: the weight index order is (l, x, y), not the map's (x, y, l). The output [B][F]
is held as the map [B][1][1][F]. standard.md §4 gap: BIASES_D[f] is the sum of OUT_D[b][f]
over the batch, as for convolution.
"""

from array_api_compat import array_namespace

from pytest_gostcnn.model.layers import Layer

from .library import Array


def _flat_weights(weights: dict[str, Array]) -> Array:
    """WEIGHTS[F][L][X][Y] reordered to [F][X][Y][L] and flattened to [F][X*Y*L]."""
    w = weights["weights"]
    xp = array_namespace(w)
    return xp.reshape(xp.permute_dims(w, (0, 2, 3, 1)), (w.shape[0], -1))


def forward(layer: Layer, inputs: list[Array], weights: dict[str, Array]) -> list:
    inp = inputs[0]
    xp = array_namespace(inp)
    out = xp.reshape(inp, (inp.shape[0], -1)) @ _flat_weights(weights).T + weights["biases"]
    return [xp.reshape(out, (inp.shape[0], 1, 1, -1))]


def backward(
    layer: Layer,
    inputs: list[Array],
    outputs: list[Array],
    out_residuals: list[Array],
    weights: dict[str, Array],
) -> list:
    xp = array_namespace(out_residuals[0])
    out_residual = xp.reshape(out_residuals[0], (out_residuals[0].shape[0], -1))
    in_residual = out_residual @ _flat_weights(weights)
    return [xp.reshape(in_residual, (out_residual.shape[0], *layer.in_shapes[0]))]


def gradient(layer: Layer, inputs: list[Array], out_residuals: list[Array]) -> dict[str, Array]:
    inp = inputs[0]
    xp = array_namespace(inp)
    out_residual = xp.reshape(out_residuals[0], (inp.shape[0], -1))
    # WEIGHTS_D[f][x][y][l] sums OUT_D[b][f] * IN[b][x][y][l] over b, in the batch's order.
    flat = xp.reshape(inp, (inp.shape[0], -1))
    grad = out_residual[0][:, None] * flat[0][None, :]
    for b in range(1, inp.shape[0]):
        grad += out_residual[b][:, None] * flat[b][None, :]
    weights_grad = xp.permute_dims(xp.reshape(grad, (-1, *inp.shape[1:])), (0, 3, 1, 2))
    return {"weights": weights_grad, "biases": xp.sum(out_residual, axis=0)}
