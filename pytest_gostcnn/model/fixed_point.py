"""The fixed-point model of integer inference (docs/standard.md §6, "Integer inference").

Every map and weight array ``t`` has one symmetric scale ``s_t`` (zero point 0); its integer
values are ``q = clamp(round(t / s_t), -2^(n-1), 2^(n-1) - 1)``. A layer's biases are
integers at ``s_in * s_w`` in the accumulator type. How each layer type's output scale
follows (its own range, or its input's) is ``output_scales``; which layers round, and
where, is ``requantises``. The suite computes the scales (``conformance/fixed_point.py``)
and hands them to the backend as a ``ScaleTable`` (docs/backends.md, "Integer types").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .layers import Layer


@dataclass(frozen=True)
class IntegerType:
    """Two's-complement integers of ``bits`` bits, with the accumulator products sum in."""

    name: str
    bits: int
    storage: type
    accumulator: type

    @property
    def largest(self) -> int:
        return 2 ** (self.bits - 1) - 1

    @property
    def smallest(self) -> int:
        return -(2 ** (self.bits - 1))


# The accumulator is part of the model (standard.md §6): every product of two int8 values
# is at most 2^14 in magnitude, so int32 holds the sum of any fan-in below 2^17; int16
# products reach 2^30, and int64 holds any fan-in below 2^33.
INTEGER_TYPES: dict[str, IntegerType] = {
    "int8": IntegerType("int8", 8, np.int8, np.int32),
    "int16": IntegerType("int16", 16, np.int16, np.int64),
}

# The layer types whose output values sit on their input's grid, at its scale: ReLU's 0 and
# max pooling's padding 0 are on every grid; split and shuffle move values.
ON_THE_INPUT_GRID = frozenset({"relu", "maxpool", "split", "shuffle"})
# The layer types that requantise every output value: a sum of products at s_in * s_w, an
# average (a division by Rx * Ry) or a sum of two maps at two scales, rounded once to the
# output's own scale. Concat requantises only an input whose scale is not the output's.
REQUANTISING = frozenset({"conv", "depthwise", "fc", "avgpool", "eltwise"})


def integer_type(dtype: str) -> IntegerType | None:
    """The integer type ``dtype`` names, or None for a floating-point type."""
    return INTEGER_TYPES.get(dtype)


# How far past the largest integer a scale reaches: the largest magnitude of an array maps
# to 2^(n-1) - 1 + REACH (127.49 in int8), so every value of it rounds to nearest inside
# the range, the range used to its last half quantum.
REACH = 0.49


def scale_of(values: np.ndarray, itype: IntegerType) -> float:
    """The scale that maps the largest magnitude of ``values`` to the largest integer plus
    ``REACH``: no value of the array saturates when rounded to nearest.

    There is no other margin: an implementation whose own error carries a value past the
    range saturates it, and that costs at most its error or half a quantum (clamping onto
    the range moves a value towards a reference inside it, and a reference beyond it lies
    within REACH of its end). A value that wraps around instead costs 2^n quanta. An
    all-zero array takes scale 1.
    """
    largest = float(np.max(np.abs(values))) if np.size(values) else 0.0
    return largest / (itype.largest + REACH) if largest > 0 else 1.0


def quantise(values: np.ndarray, scale: float, itype: IntegerType) -> np.ndarray:
    """``clamp(round(values / scale))`` in the storage type (round to nearest, ties to even)."""
    q = np.rint(np.asarray(values, dtype=np.float64) / scale)
    return np.clip(q, itype.smallest, itype.largest).astype(itype.storage)


def quantise_bias(values: np.ndarray, scale: float, itype: IntegerType, row: int) -> np.ndarray:
    """Biases as integers at ``scale`` (= s_in * s_w) in the accumulator type; ValueError
    where one does not fit it."""
    q = np.rint(np.asarray(values, dtype=np.float64) / scale)
    limit = float(np.iinfo(itype.accumulator).max)
    if q.size and float(np.max(np.abs(q))) > limit:
        raise ValueError(
            f"row {row}: a bias at scale {scale:.3g} is {float(np.max(np.abs(q))):.3g} "
            f"quanta, beyond the {np.dtype(itype.accumulator).name} accumulator"
        )
    return q.astype(itype.accumulator)


@dataclass(frozen=True)
class LayerScales:
    """The scales of one layer's arrays: one per input map, one per output map, and one
    per weight array (``filters`` or ``weights``, and ``biases`` = inputs[0] * that)."""

    inputs: tuple[float, ...]
    outputs: tuple[float, ...]
    weights: Mapping[str, float]

    def as_dict(self) -> dict:
        return {"inputs": list(self.inputs), "outputs": list(self.outputs), **self.weights}


#: The scales of every layer the suite hands over, by row number (``Layer.number``).
ScaleTable = dict[int, LayerScales]


def weight_scales(layer: Layer, input_scale: float, weight_scale: float) -> dict[str, float]:
    """A weighted layer's weight scales: its filters' (or FC weights') and its biases'."""
    name = next(k for k in layer.weight_shapes if k != "biases")
    return {name: weight_scale, "biases": input_scale * weight_scale}


def output_scales(
    layer: Layer,
    inputs: Sequence[float],
    outputs: Sequence[np.ndarray],
    itype: IntegerType,
    margin: float = 1.0,
) -> tuple[float, ...]:
    """Each output map's scale: its input's where the values stay on that grid, the larger
    input scale for concat (that input passes exactly), else the output's own range times
    ``margin`` (1 in verification; a benchmark's calibration leaves room for other images)."""
    name = layer.type.name
    if name in ON_THE_INPUT_GRID:
        return tuple(inputs[0] for _ in outputs)
    if name == "concat":
        return (max(inputs),)
    return tuple(margin * scale_of(values, itype) for values in outputs)


def requantises(layer: Layer, scales: LayerScales) -> list[bool]:
    """Per input map (concat) or for the one output: whether the layer rounds there."""
    name = layer.type.name
    if name == "concat":
        return [s != scales.outputs[0] for s in scales.inputs]
    return [name in REQUANTISING]
