"""Fully connected layer (section 6.8, Appendix A): WEIGHTS[F][L][X][Y], BIASES[F].

standard.md §4: the weight index order is (l, x, y), not the map's (x, y, l). The output [B][F]
is held as the map [B][1][1][F]. standard.md §4 gap: BIASES_D[f] is the sum of OUT_D[b][f]
over the batch, as for convolution.
"""

from array_api_compat import array_namespace, device, is_numpy_namespace

from pytest_gostcnn.machine import pool
from pytest_gostcnn.model.layers import Layer

from ._window import numpy_parts
from .library import Array


def _standard_order(inp: Array) -> Array:
    """The map [B][X][Y][L] as the rows [B][L*X*Y], in WEIGHTS' index order (l, x, y): the
    batch's few rows are reordered, never the layer's weights."""
    xp = array_namespace(inp)
    return xp.reshape(xp.permute_dims(inp, (0, 3, 1, 2)), (inp.shape[0], -1))


def _as_matrix(weights: dict[str, Array]) -> Array:
    """WEIGHTS[F][L][X][Y] as [F][L*X*Y], a view."""
    w = weights["weights"]
    return array_namespace(w).reshape(w, (w.shape[0], -1))


def forward(layer: Layer, inputs: list[Array], weights: dict[str, Array]) -> list:
    inp = inputs[0]
    xp = array_namespace(inp)
    out = _standard_order(inp) @ _as_matrix(weights).T + weights["biases"]
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
    x, y, channels = layer.in_shapes[0]
    in_residual = xp.reshape(out_residual @ _as_matrix(weights), (-1, channels, x, y))
    return [xp.permute_dims(in_residual, (0, 2, 3, 1))]


def gradient(layer: Layer, inputs: list[Array], out_residuals: list[Array]) -> dict[str, Array]:
    inp = inputs[0]
    xp = array_namespace(inp)
    out_residual = xp.reshape(out_residuals[0], (inp.shape[0], -1))
    # WEIGHTS_D[f][l][x][y] sums OUT_D[b][f] * IN[b][x][y][l] over b, in the batch's order.
    flat = _standard_order(inp)
    features, length = out_residual.shape[1], flat.shape[1]
    grad = xp.empty(
        (features, length), dtype=xp.result_type(flat, out_residual), device=device(flat)
    )
    # On NumPy, blocks of rows whose products stay in cache, on the pool's threads.
    step = max(1, pool.BLOCK_ELEMENTS // length) if is_numpy_namespace(xp) else features

    def part(span: slice) -> None:
        for cut in pool.steps(span, step):
            block = out_residual[0, cut][:, None] * flat[0][None, :]
            for b in range(1, inp.shape[0]):
                block += out_residual[b, cut][:, None] * flat[b][None, :]
            grad[cut] = block

    pool.split(numpy_parts(flat, features, features * length * inp.shape[0]), part)
    weights_grad = xp.reshape(grad, (-1, *layer.weight_shapes["weights"][1:]))
    return {"weights": weights_grad, "biases": xp.sum(out_residual, axis=0)}
