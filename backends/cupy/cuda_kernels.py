"""The CuPy backend's fused CUDA kernels (source: ``kernels.cu``): ``CudaKernels`` is
``XpKernels`` with the steps a GPU does in one pass that the xp code does in many array
operations (im2col, col2im, depthwise convolution, max pooling, the TF32 / bfloat16
roundings) replaced; docs/gpu.md lists them and says how they are checked.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

import numpy as np

from pytest_gostcnn.model.layers import Layer

from ..common import Window, is_pointwise
from .xp_kernels import Gemm, XpKernels

# Storage kinds, the kernels' template argument K.
FLOAT32, FLOAT16, BFLOAT16 = 0, 1, 2
THREADS = 256
# NVRTC's, through cupy.RawModule. NVRTC may fuse a product and its sum into one FMA (one
# rounding fewer than the xp code), so results can differ from the xp steps in the last bit.
OPTIONS = ("-std=c++17",)
MAX_BLOCKS = 65536
# depthwise FILTERS_D: threads per block over channels x over positions (SOURCE's
# ``rows[8][32]`` has this shape: a test holds the two together), and blocks.
GRADIENT_CHANNELS, GRADIENT_ROWS, GRADIENT_BLOCKS = 32, 8, 512

# The CUDA source, shipped as package data beside this module.
SOURCE = resources.files(__package__).joinpath("kernels.cu").read_text(encoding="utf-8")

# Round to nearest, ties to even, clearing the low {bits} bits; a NaN stays a quiet NaN
# (``rounding._rounded_bits`` in one pass).
ROUNDED = """
unsigned int b = __float_as_uint(x);
const unsigned int keep = 0xffffffffu << {bits};
if ((b & 0x7fffffffu) > 0x7f800000u) b = (b | 0x400000u) & keep;
else b = (b + ((1u << ({bits} - 1)) - 1u) + ((b >> {bits}) & 1u)) & keep;
"""


def fits_int32(layer: Layer) -> bool:
    """Whether the kernels' 32-bit index arithmetic holds for ``layer``: one image's map,
    output map and im2col columns each have fewer than 2**31 elements. (Indices across the
    batch are 64-bit.)"""
    (x, y, channels), (x_out, y_out, features) = layer.in_shapes[0], layer.out_shapes[0]
    columns = 0
    if layer.type.name == "conv":
        columns = x_out * y_out * layer.params["Rx"] * layer.params["Ry"] * channels
    return max(x * y * channels, x_out * y_out * features, columns) < 2**31


def geometry(layer: Layer) -> tuple[np.int32, ...]:
    """The ten ints of a kernel's ``GEOMETRY``: X Y L XO YO RX RY S PX PY."""
    return tuple(np.int32(v) for v in Window.of(layer))


class CudaKernels(XpKernels):
    """``XpKernels`` on CuPy, with the fused kernels of this module's ``SOURCE``."""

    def __init__(self, cupy: Any, dtype: str, gemm: Gemm | None, workspace_bytes: int) -> None:
        super().__init__(cupy, dtype, gemm=gemm, workspace_bytes=workspace_bytes)
        self.kind = {"float16": FLOAT16, "bfloat16": BFLOAT16}.get(dtype, FLOAT32)
        self.raw = "unsigned short" if dtype == "float16" else "float"
        self._functions: dict[str, Any] = {}
        self._tf32 = elementwise_kernel(cupy, "tf32")
        self._bfloat16 = elementwise_kernel(cupy, "bfloat16")

    def _function(self, name: str):
        """The kernel ``name`` (a template instance), compiled on first use."""
        if name not in self._functions:
            module = self.xp.RawModule(code=SOURCE, options=OPTIONS, name_expressions=(name,))
            self._functions[name] = module.get_function(name)
        return self._functions[name]

    def _each(self, name: str, layer: Layer, out, *inputs) -> None:
        """Run a kernel with one thread per element of ``out``: ``name(inputs.., out, count,
        geometry)``."""
        if out.size == 0:
            return
        blocks = min(MAX_BLOCKS, -(-out.size // THREADS))
        args = (*[self.xp.ascontiguousarray(a) for a in inputs], out, np.int64(out.size))
        self._function(name)((blocks,), (THREADS,), (*args, *geometry(layer)))

    # Rounding. ----------------------------------------------------------------------------

    def round_tf32(self, a):
        return self._tf32(a.astype(self.xp.float32, copy=False))

    def store(self, a):
        if self.dtype == "bfloat16":
            return self._bfloat16(a.astype(self.xp.float32, copy=False))
        return a.astype(self.storage, copy=False)

    # Convolution: im2col and col2im kernels around the shared GEMMs. ----------------------

    def _im2col(self, layer: Layer, x):
        if is_pointwise(layer) or not fits_int32(layer):
            yield from super()._im2col(layer, x)
            return
        p = layer.params
        x_out, y_out, _ = layer.out_shapes[0]
        depth = p["Rx"] * p["Ry"] * x.shape[3]
        x = self.xp.ascontiguousarray(x)
        for first, n in self._chunks(x.shape[0], x_out * y_out * depth * x.itemsize):
            cols = self.xp.empty((n * x_out * y_out, depth), dtype=x.dtype)
            self._each(f"im2col<{self.raw}>", layer, cols, x[first : first + n])
            yield first, n, cols

    def conv_backward(
        self, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
    ) -> list:
        if is_pointwise(layer) or not fits_int32(layer):
            return super().conv_backward(layer, inputs, outputs, out_residuals, weights)
        out_residual, filters = self.xp.ascontiguousarray(out_residuals[0]), weights["filters"]
        features = filters.shape[3]
        matrix_t = filters.reshape(-1, features).T
        x_out, y_out, _ = layer.out_shapes[0]
        in_residual = self.xp.empty((out_residual.shape[0], *layer.in_shapes[0]), self.storage)
        per_image = x_out * y_out * filters.size // features * 4
        for first, n in self._chunks(out_residual.shape[0], per_image):
            cols = self._gemm(out_residual[first : first + n].reshape(-1, features), matrix_t)
            self._each(f"col2im<{self.kind}>", layer, in_residual[first : first + n], cols)
        return [in_residual]

    # Depthwise convolution. ---------------------------------------------------------------

    def depthwise_forward(self, layer: Layer, inputs: list, weights: dict) -> list:
        if not fits_int32(layer):
            return super().depthwise_forward(layer, inputs, weights)
        out = self.xp.empty((inputs[0].shape[0], *layer.out_shapes[0]), dtype=self.storage)
        self._each(
            f"depthwise_forward<{self.kind}>",
            layer,
            out,
            inputs[0],
            weights["filters"],
            weights["biases"],
        )
        return [out]

    def depthwise_backward(
        self, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
    ) -> list:
        if not fits_int32(layer):
            return super().depthwise_backward(layer, inputs, outputs, out_residuals, weights)
        in_residual = self.xp.empty((inputs[0].shape[0], *layer.in_shapes[0]), self.storage)
        name = f"depthwise_backward<{self.kind}>"
        self._each(name, layer, in_residual, out_residuals[0], weights["filters"])
        return [in_residual]

    def depthwise_gradient(self, layer: Layer, x, out_residual) -> dict:
        # FILTERS_D sums over positions per thread, then per block, then over the blocks: an
        # order other than the xp step's, but a fixed one (deterministic, no atomics).
        if not fits_int32(layer):
            return super().depthwise_gradient(layer, x, out_residual)
        rx, ry = layer.params["Rx"], layer.params["Ry"]
        channels = x.shape[3]
        positions = out_residual.shape[0] * out_residual.shape[1] * out_residual.shape[2]
        blocks = max(1, min(GRADIENT_BLOCKS, -(-positions // GRADIENT_ROWS)))
        partial = self.xp.empty((blocks, rx * ry, channels), dtype=self.xp.float32)
        grid = (blocks, -(-channels // GRADIENT_CHANNELS))
        args = (
            self.xp.ascontiguousarray(x),
            self.xp.ascontiguousarray(out_residual),
            partial,
            np.int64(positions),
            *geometry(layer),
        )
        kernel = self._function(f"depthwise_gradient<{self.raw}, {rx}, {ry}>")
        kernel(grid, (GRADIENT_CHANNELS, GRADIENT_ROWS), args)
        return {
            "filters": self.store_gradient(partial.sum(axis=0).reshape(rx, ry, channels)),
            "biases": self.store_gradient(self._channel_sums(out_residual)),
        }

    # Max pooling. -------------------------------------------------------------------------

    def maxpool_forward(self, layer: Layer, inputs: list, weights: dict) -> list:
        if not fits_int32(layer):
            return super().maxpool_forward(layer, inputs, weights)
        x = inputs[0]
        out = self.xp.empty((x.shape[0], *layer.out_shapes[0]), dtype=x.dtype)
        self._each(f"maxpool_forward<{self.raw}>", layer, out, x)
        return [out]

    def maxpool_backward(
        self, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
    ) -> list:
        if not fits_int32(layer):
            return super().maxpool_backward(layer, inputs, outputs, out_residuals, weights)
        in_residual = self.xp.empty((inputs[0].shape[0], *layer.in_shapes[0]), self.storage)
        name = f"maxpool_backward<{self.kind}>"
        self._each(name, layer, in_residual, inputs[0], outputs[0], out_residuals[0])
        return [in_residual]


# The elementwise kernels: (input, output, body) as cupy.ElementwiseKernel takes them.
ROUNDING_KERNELS = {
    # float32 -> float32 with the low bits rounded off: TF32 keeps 10 mantissa bits.
    "tf32": ("float32 x", "float32 y", ROUNDED.format(bits=13) + "y = __uint_as_float(b);"),
    "bfloat16": ("float32 x", "float32 y", ROUNDED.format(bits=16) + "y = __uint_as_float(b);"),
    # float32 -> uint16: the bfloat16 nearest each value, as the bits a bfloat16 GEMM reads.
    "bfloat16 halves": (
        "float32 x",
        "uint16 y",
        ROUNDED.format(bits=16) + "y = (unsigned short)(b >> 16);",
    ),
}


def elementwise_kernel(cupy: Any, which: str):
    """One of ``ROUNDING_KERNELS``, compiled by CuPy on first call."""
    inputs, outputs, body = ROUNDING_KERNELS[which]
    return cupy.ElementwiseKernel(inputs, outputs, body, f"gost_{which.replace(' ', '_')}")
