"""The section 8 data: network input and output residual from U(-127, 128), weights from U(-1, 1).

Every draw takes an explicit NumPy ``Generator`` so that one seed reproduces a run.
"""

from __future__ import annotations

import numpy as np

from .executor import Weights
from .network import Network

INPUT_RANGE = (-127.0, 128.0)
WEIGHT_RANGE = (-1.0, 1.0)


def draw_weights(network: Network, rng: np.random.Generator) -> Weights:
    """Every weight array of the network (filters, weights, biases) from U(-1, 1), float64."""
    return {
        layer.number: {
            name: rng.uniform(*WEIGHT_RANGE, size=shape)
            for name, shape in layer.weight_shapes.items()
        }
        for layer in network.weight_layers
    }


def draw_input(network: Network, batch: int, rng: np.random.Generator) -> np.ndarray:
    """The network input [B][X][Y][L] from U(-127, 128), float64."""
    return rng.uniform(*INPUT_RANGE, size=(batch, *network.input_shape))


def draw_out_residual(network: Network, batch: int, rng: np.random.Generator) -> np.ndarray:
    """The residual of the network output [B][X][Y][F] from U(-127, 128), float64."""
    return rng.uniform(*INPUT_RANGE, size=(batch, *network.output_shape))
