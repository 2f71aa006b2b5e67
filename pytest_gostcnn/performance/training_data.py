"""Section 9's training data (standard.md §7.8): the drawn weights, the segments training
runs in, and the output residual's scale. The images and residuals themselves are made in
``images.py``."""

from __future__ import annotations

import math

import numpy as np

from pytest_gostcnn.model.network import Network

# The output residual is U(-1, 1) x the type's scale. The update has no learning rate, so
# weights grow over rounds on random data: training sets them back to the drawn values every
# segment of SEGMENT_ROUNDS rounds. float32: 2^-28 keeps a segment's values in range and
# above the subnormals, with updates large enough to see; float16 (float32 masters): a scale
# whose residuals are normal moves the weights by more than their size in one update, so
# every round is a segment of its own (standard.md §7.8 has the measurements).
RESIDUAL_SCALE = 2.0**-28
SEGMENT_ROUNDS = 16
TRAINING_DATA = {"float32": (SEGMENT_ROUNDS, RESIDUAL_SCALE), "float16": (1, 2.0**-2)}


def training_data(dtype: str) -> tuple[int, float]:
    """(rounds per segment, output residual scale) of a training test in ``dtype``."""
    return TRAINING_DATA.get(dtype, TRAINING_DATA["float32"])


def benchmark_weights(network: Network, rng: np.random.Generator) -> dict:
    """Weights from U(-a, a), a = sqrt(6 / fan-in): activations keep their scale."""
    weights = {}
    for layer in network.weight_layers:
        bound = math.sqrt(6.0 / layer.fan_in)
        weights[layer.number] = {
            name: rng.uniform(-bound, bound, size=shape)
            for name, shape in layer.weight_shapes.items()
        }
    return weights
