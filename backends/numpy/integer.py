"""The NumPy backend's integer inference (int8, int16) under the fixed-point model of
docs/standard.md §6: maps and weights held as their integers, every product and sum exact,
each requantisation rounded to nearest (ties to even) and saturated.

The sums of products run in BLAS on the integers as floating-point numbers, which is exact
while every partial sum is an integer of at most 24 bits (float32) or 53 bits (float64):
``gemm_dtype`` picks the narrower type whose bound holds for the layer, from its fan-in,
the largest integers and its biases. The rest reuses the float kernels (``kernels``), which
compute in their arguments' dtype.
"""

from __future__ import annotations

import numpy as np

from pytest_gostcnn.model.fixed_point import IntegerType, LayerScales
from pytest_gostcnn.model.layers import Layer

from ..common import kernel
from . import kernels
from .workspace import Workspace

# The largest magnitude up to which every integer is exact in each floating-point type.
EXACT_INTEGERS = ((np.float32, 2**24), (np.float64, 2**53))
# The layer types whose outputs are on their input's grid: the float kernels run on the
# integers themselves (max pooling pads with 0, ReLU's 0, split and shuffle move values).
ON_THE_GRID = frozenset({"relu", "maxpool", "split", "shuffle"})


def gemm_dtype(layer: Layer, itype: IntegerType, biases: np.ndarray) -> type:
    """The floating-point type in which ``layer``'s sums of products are exact: every
    partial sum is at most fan-in * 2^(2(n-1)) + max |bias| in magnitude."""
    largest = 2 ** (itype.bits - 1)
    bias = int(np.max(np.abs(biases.astype(np.int64)))) if biases.size else 0
    bound = layer.fan_in * largest * largest + bias
    for dtype, exact in EXACT_INTEGERS:
        if bound < exact:
            return dtype
    raise ValueError(
        f"row {layer.number}: sums of up to {bound:.3g} are not exact in float64; this layer "
        "needs an integer GEMM"
    )


class IntegerKernels:
    """Forward kernels of one integer type: ``forward(layer, inputs, weights, scales)``."""

    def __init__(self, itype: IntegerType, workspace: Workspace) -> None:
        self.itype = itype
        self.workspace = workspace

    def requantise(self, values: np.ndarray, multiplier: float) -> np.ndarray:
        """``values * multiplier`` rounded to nearest (ties to even) and saturated to the
        type's range, in the storage type; the product in float64."""
        q = np.rint(np.multiply(values, multiplier, dtype=np.float64))
        np.clip(q, self.itype.smallest, self.itype.largest, out=q)
        return q.astype(self.itype.storage)

    def forward(self, layer: Layer, inputs: list, weights: dict, scales: LayerScales) -> list:
        name, ws = layer.type.name, self.workspace
        if name in ON_THE_GRID:
            return kernel(kernels, layer, "forward")(ws, layer, inputs, weights)
        if name in ("conv", "depthwise", "fc"):
            return [self.weighted(layer, inputs[0], weights, scales)]
        out = scales.outputs[0]
        if name == "avgpool":
            x = inputs[0].astype(np.float64)  # the sum of Rx*Ry integers, exact in float64
            average = kernel(kernels, layer, "forward")(ws, layer, [x], {})[0]
            return [self.requantise(average, scales.inputs[0] / out)]
        if name == "eltwise":
            (a, b), (sa, sb) = inputs, scales.inputs
            total = np.multiply(a, sa / out, dtype=np.float64)
            total += np.multiply(b, sb / out, dtype=np.float64)
            return [self.requantise(total, 1.0)]
        if name == "concat":
            parts = [
                x if s == out else self.requantise(x, s / out)
                for x, s in zip(inputs, scales.inputs, strict=True)
            ]
            return kernel(kernels, layer, "forward")(ws, layer, parts, {})
        raise ValueError(f"no integer kernel for layer type {name!r}")

    def weighted(
        self, layer: Layer, x: np.ndarray, weights: dict, scales: LayerScales
    ) -> np.ndarray:
        """Conv, depthwise, FC: the exact sum of integer products and the integer bias, at
        s_in * s_w, requantised to the output's scale."""
        sums = self.accumulate(layer, x, weights)
        return self.requantise(sums, scales.weights["biases"] / scales.outputs[0])

    def accumulate(self, layer: Layer, x: np.ndarray, weights: dict) -> np.ndarray:
        """Conv, depthwise, FC: the exact sums of products plus the biases, as integers in
        the floating-point type ``gemm_dtype`` picks."""
        name = "weights" if layer.type.name == "fc" else "filters"
        dtype = gemm_dtype(layer, self.itype, weights["biases"])
        arguments = {name: weights[name].astype(dtype), "biases": weights["biases"].astype(dtype)}
        return kernel(kernels, layer, "forward")(
            self.workspace, layer, [x.astype(dtype)], arguments
        )[0]
