"""Split (section 6.5, Appendix A): OUT1 = channels [0, L1), OUT2 = channels [L1, L).

Table rows name the outputs ``n.1`` and ``n.2``. Each is a copy, not a view of IN: a view
would keep all of IN alive for as long as either half is kept.
"""

import numpy as np

from pytest_gostcnn.model.layers import Layer


def forward(layer: Layer, inputs: list[np.ndarray], weights: dict[str, np.ndarray]) -> list:
    first = layer.params["L1"]
    return [
        np.ascontiguousarray(inputs[0][..., :first]),
        np.ascontiguousarray(inputs[0][..., first:]),
    ]


def backward(
    layer: Layer,
    inputs: list[np.ndarray],
    outputs: list[np.ndarray],
    out_residuals: list[np.ndarray],
    weights: dict[str, np.ndarray],
) -> list:
    return [np.concatenate(out_residuals, axis=3)]
