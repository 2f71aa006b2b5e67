"""The section 8 data: network input and output residual from U(-127, 128), weights in [-1, 1].

A network's weights are drawn by one of two readings of 8.2 (standard.md §6): ``scaled``
(the default) keeps every layer's values at the scale of its input, ``full-range`` draws
every weight from U(-1, 1). Every draw takes an explicit NumPy ``Generator`` so that one
seed reproduces a run.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from .executor import Weights
from .layers import Layer
from .network import Network

INPUT_RANGE = (-127.0, 128.0)
WEIGHT_RANGE = (-1.0, 1.0)
WEIGHT_READINGS = ("scaled", "full-range")


def weight_bound(layer: Layer, name: str, reading: str = "scaled") -> float:
    """The half-width ``a`` of U(-a, a) for one weight array of ``layer``.

    ``scaled``: a = min(1, sqrt(6 / fan-in)) for filters and weights, 1 for biases, so each
    weighted sum keeps the second moment of its input through ReLU (as He initialisation
    does) and a bias stays visible beside it at any depth. ``full-range``: 1 for every array.
    """
    if reading not in WEIGHT_READINGS:
        raise ValueError(f"unknown weight reading {reading!r}; choose one of {WEIGHT_READINGS}")
    if reading == "full-range" or name == "biases":
        return WEIGHT_RANGE[1]
    return min(WEIGHT_RANGE[1], math.sqrt(6.0 / layer.fan_in))


def draw_weights(network: Network, rng: np.random.Generator, reading: str = "scaled") -> Weights:
    """Every weight array of the network (filters, weights, biases) by ``reading``, float64."""
    return {
        layer.number: {
            name: rng.uniform(-1.0, 1.0, size=shape) * weight_bound(layer, name, reading)
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


def draw_slices(
    draw: Callable[[Network, int, np.random.Generator], np.ndarray],
    network: Network,
    batch: int,
    rng: np.random.Generator,
) -> DrawnBatch:
    """``draw(network, batch, rng)`` (``draw_input``, ``draw_out_residual``) to be read a
    slice at a time, without the whole batch drawn; ``rng`` is left as the whole draw
    leaves it."""
    return DrawnBatch(draw, network, batch, rng)


class DrawnBatch:
    """A batch's draw read as an array is sliced: ``drawn[a:b]`` is the whole draw's
    ``[a:b]``, drawn then. A uniform value takes one step of the generator (NumPy's
    ``default_rng``, PCG64), so a slice's values start ``a`` images of steps in."""

    def __init__(
        self,
        draw: Callable[[Network, int, np.random.Generator], np.ndarray],
        network: Network,
        batch: int,
        rng: np.random.Generator,
    ) -> None:
        self.draw, self.network = draw, network
        self.bits, self.start = type(rng.bit_generator), rng.bit_generator.state
        image = draw(network, 0, np.random.default_rng(0)).shape[1:]
        self.shape = (batch, *image)
        self.per_image = math.prod(image)
        rng.bit_generator.advance(batch * self.per_image)

    def __getitem__(self, span: slice) -> np.ndarray:
        first, stop, step = span.indices(self.shape[0])
        if step != 1:
            raise ValueError("a drawn batch is read a contiguous slice at a time")
        bits = self.bits()
        bits.state = self.start
        bits.advance(first * self.per_image)
        return self.draw(self.network, max(stop - first, 0), np.random.Generator(bits))

    def rounded(self, rounding: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """The whole draw, each image rounded by ``rounding`` (a data type's, elementwise)
        as it is drawn: one float64 array, no whole temporary beside it."""
        whole = np.empty(self.shape)
        for image in range(self.shape[0]):
            whole[image] = rounding(self[image : image + 1])[0]
        return whole
