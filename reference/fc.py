"""Fully connected layer (section 6.8, Appendix A): WEIGHTS[F][L][X][Y], BIASES[F].

standard.md §4: the weight index order is (l, x, y), not the map's (x, y, l). The output [B][F]
is held as the map [B][1][1][F]. standard.md §4 gap: BIASES_D[f] is the sum of OUT_D[b][f]
over the batch, as for convolution.
"""

import numpy as np

from pytest_gostcnn.model.layers import Layer


def _flat_weights(weights: dict[str, np.ndarray]) -> np.ndarray:
    """WEIGHTS[F][L][X][Y] reordered to [F][X][Y][L] and flattened to [F][X*Y*L]."""
    w = weights["weights"]
    return w.transpose(0, 2, 3, 1).reshape(w.shape[0], -1)


def forward(layer: Layer, inputs: list[np.ndarray], weights: dict[str, np.ndarray]) -> list:
    inp = inputs[0]
    out = inp.reshape(inp.shape[0], -1) @ _flat_weights(weights).T + weights["biases"]
    return [out.reshape(inp.shape[0], 1, 1, -1)]


def backward(
    layer: Layer,
    inputs: list[np.ndarray],
    outputs: list[np.ndarray],
    out_residuals: list[np.ndarray],
    weights: dict[str, np.ndarray],
) -> list:
    out_residual = out_residuals[0].reshape(out_residuals[0].shape[0], -1)
    in_residual = out_residual @ _flat_weights(weights)
    return [in_residual.reshape(out_residual.shape[0], *layer.in_shapes[0])]


def gradient(
    layer: Layer, inputs: list[np.ndarray], out_residuals: list[np.ndarray]
) -> dict[str, np.ndarray]:
    out_residual = out_residuals[0].reshape(out_residuals[0].shape[0], -1)
    weights_grad = np.einsum("bxyl,bf->flxy", inputs[0], out_residual)
    return {"weights": weights_grad, "biases": out_residual.sum(axis=0)}
