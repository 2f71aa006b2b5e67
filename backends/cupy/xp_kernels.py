"""The layer kernels of the CuPy backend, written once against an array module ``xp``
and run with NumPy on the CPU by the tests. Every convolution and fully connected step is
one 2-D product through the ``gemm`` hook (``xp.matmul``, or cuBLAS: ``cublas.py``); on a
GPU ``cuda_kernels.py`` fuses some steps. Arrays are the standard's, channels last
(docs/standard.md §2); the data types and their float32 sums: docs/gpu.md, "Data types".
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from pytest_gostcnn.backend import BackendError
from pytest_gostcnn.model.dtypes import master_dtype
from pytest_gostcnn.model.layers import Layer
from pytest_gostcnn.reference._window import crop, offsets

from ..common import (
    channel_parts,
    eltwise_in_residuals,
    from_lxy,
    images_per_chunk,
    is_global,
    is_pointwise,
    kernel,
    lxy,
    shuffle,
    update,
)
from .rounding import round_bfloat16, round_tf32

# im2col / col2im buffers of one chunk of images stay below this many bytes.
WORKSPACE_BYTES = 512 << 20

INFERENCE_DTYPES = ("float32", "tf32", "float16", "bfloat16")
TRAINING_DTYPES = ("float32", "float16")

Gemm = Callable[[Any, Any], Any]


def matmul_gemm(xp: Any) -> Gemm:
    """The default GEMM hook: ``a @ b`` in float32, whatever the operands' storage type."""

    def gemm(a, b):
        return xp.matmul(a.astype(xp.float32, copy=False), b.astype(xp.float32, copy=False))

    return gemm


class XpKernels:
    """The executor's four layer steps (``executor.Kernels``) over any array module ``xp``.

    ``gemm(a, b)`` multiplies two 2-D arrays in the storage type (either may be a
    transposed view) and returns the float32 product. ``workspace_bytes`` bounds the
    im2col / col2im buffers: they are filled a chunk of whole images at a time.
    Kernels never write into their arguments (``update`` changes ``weights`` in place).
    """

    def __init__(
        self,
        xp: Any,
        dtype: str,
        gemm: Gemm | None = None,
        workspace_bytes: int = WORKSPACE_BYTES,
    ) -> None:
        if dtype not in INFERENCE_DTYPES:
            raise BackendError(f"the xp kernels compute {', '.join(INFERENCE_DTYPES)}, not {dtype}")
        self.xp = xp
        self.dtype = dtype
        self.storage = xp.float16 if dtype == "float16" else xp.float32
        # Training keeps gradients and weights in the master type (float32 for float16:
        # docs/standard.md §6); forward and backward read the weights in ``storage``.
        self.master = xp.float32 if master_dtype(dtype) == "float32" else self.storage
        self.gemm = gemm or matmul_gemm(xp)
        self.workspace_bytes = workspace_bytes

    # Storage and accumulation. ------------------------------------------------------------

    def store(self, a):
        """A float32 result in the storage type: float16, bfloat16-in-float32, or float32."""
        if self.dtype == "bfloat16":
            return round_bfloat16(self.xp, a)
        return a.astype(self.storage, copy=False)

    def store_gradient(self, a):
        """A float32 gradient in the master type: float32 for float16, else ``store``."""
        if self.master != self.storage:
            return a.astype(self.master, copy=False)
        return self.store(a)

    def _working(self, weights: dict) -> dict:
        """The weights as forward and backward read them: master copies rounded to the
        storage type (float16 training), else the weights themselves."""
        if self.master == self.storage:
            return weights
        return {name: w.astype(self.storage, copy=False) for name, w in weights.items()}

    def _map(self, a):
        """``store`` as a fresh contiguous map (crops and transposes are views)."""
        return self.xp.ascontiguousarray(self.store(a))

    def _acc(self, a):
        """An operand in the accumulation type, float32 (a view when it already is)."""
        return a.astype(self.xp.float32, copy=False)

    def round_tf32(self, a):
        """``a`` with its float32 values rounded to TF32 (``round_tf32``)."""
        return round_tf32(self.xp, a)

    def _gemm(self, a, b):
        """``a @ b`` in float32 through the hook; tf32 factors rounded first (``round_tf32``)."""
        if self.dtype == "tf32":
            a, b = self.round_tf32(a), self.round_tf32(b)
        return self.gemm(a, b)

    def _channel_sums(self, residual):
        """BIASES_D: OUT_D summed over B, X and Y, in float32: a row of ones times the
        [B*X*Y][L] matrix, through the GEMM hook (a GPU sums a matrix's columns fastest as
        a product; training types only, so no TF32 rounding applies)."""
        rows = residual.reshape(-1, residual.shape[-1])
        return self.gemm(self.xp.ones((1, rows.shape[0]), dtype=rows.dtype), rows)[0]

    def _pad(self, a, layer: Layer):
        """``a`` with Px / Py zero rows and columns on each side (docs/standard.md §4)."""
        px, py = layer.params["Px"], layer.params["Py"]
        if px == py == 0:
            return a
        return self.xp.pad(a, ((0, 0), (px, px), (py, py), (0, 0)))

    def _padded_zeros(self, layer: Layer, batch: int):
        """A float32 padded input map where window offsets accumulate (col2im, scatters)."""
        x, y, channels = layer.in_shapes[0]
        px, py = layer.params["Px"], layer.params["Py"]
        return self.xp.zeros((batch, x + 2 * px, y + 2 * py, channels), dtype=self.xp.float32)

    def _chunks(self, batch: int, bytes_per_image: int) -> Iterator[tuple[int, int]]:
        """``(first image, count)`` of chunks whose buffers stay within the workspace."""
        step = images_per_chunk(batch, bytes_per_image, self.workspace_bytes)
        for first in range(0, batch, step):
            yield first, min(step, batch - first)

    # The executor's four steps. -----------------------------------------------------------

    def forward(self, layer: Layer, inputs: list, weights: dict) -> list:
        return kernel(self, layer, "forward")(layer, inputs, self._working(weights))

    def backward(
        self, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
    ) -> list:
        step = kernel(self, layer, "backward")
        return step(layer, inputs, outputs, out_residuals, self._working(weights))

    def gradient(self, layer: Layer, inputs: list, out_residuals: list) -> dict:
        return kernel(self, layer, "gradient")(layer, inputs[0], out_residuals[0])

    def update(self, layer: Layer, weights: dict, grads: dict, batch: int) -> None:
        if self.master != self.storage:
            # A weight still in the storage type (as loaded) becomes its float32 master.
            for name, w in weights.items():
                if w.dtype != self.master:
                    weights[name] = w.astype(self.master)
        update(weights, grads, batch, self._rounded_update)

    def _rounded_update(self, w, grad, batch: int):
        """W + W_D / B in float32, rounded once to the storage type; None for a float32
        weight, which ``update`` adds to in place."""
        if w.dtype == self.xp.float32 and self.dtype != "bfloat16":
            return None
        return self.store(self._acc(w) + self._acc(grad) / batch)

    # Convolution (section 6.1): im2col + GEMM, chunked over the batch. --------------------

    def _im2col(self, layer: Layer, x) -> Iterator[tuple[int, int, Any]]:
        """Yield ``(first, n, cols)``: [n*Xout*Yout][Rx*Ry*L], columns in FILTERS' order.

        A 1x1 stride-1 unpadded layer reads the map itself; others copy one strided slice
        of the padded chunk per window offset.
        """
        p = layer.params
        x_out, y_out, _ = layer.out_shapes[0]
        channels = x.shape[3]
        if is_pointwise(layer):
            yield 0, x.shape[0], x.reshape(-1, channels)
            return
        depth = p["Rx"] * p["Ry"] * channels
        per_image = x_out * y_out * depth * x.itemsize
        for first, n in self._chunks(x.shape[0], per_image):
            padded = self._pad(x[first : first + n], layer)
            cols = self.xp.empty((n, x_out, y_out, p["Rx"], p["Ry"], channels), dtype=x.dtype)
            for rx, ry, index in offsets(layer):
                cols[:, :, :, rx, ry, :] = padded[index]
            yield first, n, cols.reshape(n * x_out * y_out, depth)

    def conv_forward(self, layer: Layer, inputs: list, weights: dict) -> list:
        x, filters = inputs[0], weights["filters"]
        matrix = filters.reshape(-1, filters.shape[3])
        biases = self._acc(weights["biases"])
        out = self.xp.empty((x.shape[0], *layer.out_shapes[0]), dtype=self.storage)
        for first, n, cols in self._im2col(layer, x):
            rows = self._gemm(cols, matrix)
            rows += biases
            out[first : first + n] = self.store(rows).reshape(n, *layer.out_shapes[0])
        return [out]

    def conv_backward(
        self, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
    ) -> list:
        # IN_D: OUT_D @ FILTERS^T gives each output's window of residuals (the columns of
        # im2col); col2im adds them back to the positions they came from, in float32.
        out_residual, filters = out_residuals[0], weights["filters"]
        rx, ry, channels, features = filters.shape
        matrix_t = filters.reshape(-1, features).T
        batch = out_residual.shape[0]
        x_out, y_out, _ = layer.out_shapes[0]
        in_residual = self.xp.empty((batch, *layer.in_shapes[0]), dtype=self.storage)
        if is_pointwise(layer):
            rows = self._gemm(out_residual.reshape(-1, features), matrix_t)
            in_residual[...] = self.store(rows).reshape(in_residual.shape)
            return [in_residual]
        per_image = x_out * y_out * rx * ry * channels * 4 + self._padded_bytes(layer)
        for first, n in self._chunks(batch, per_image):
            cols = self._gemm(out_residual[first : first + n].reshape(-1, features), matrix_t)
            cols = cols.reshape(n, x_out, y_out, rx, ry, channels)
            padded = self._padded_zeros(layer, n)
            for ox, oy, index in offsets(layer):
                padded[index] += cols[:, :, :, ox, oy, :]
            in_residual[first : first + n] = self.store(crop(padded, layer))
        return [in_residual]

    def _padded_bytes(self, layer: Layer) -> int:
        x, y, channels = layer.in_shapes[0]
        return (x + 2 * layer.params["Px"]) * (y + 2 * layer.params["Py"]) * channels * 4

    def conv_gradient(self, layer: Layer, x, out_residual) -> dict:
        # FILTERS_D = im2col(IN)^T @ OUT_D, summed over the chunks in float32.
        features = out_residual.shape[3]
        shape = layer.weight_shapes["filters"]
        total = self.xp.zeros((shape[0] * shape[1] * shape[2], features), dtype=self.xp.float32)
        for first, n, cols in self._im2col(layer, x):
            total += self._gemm(cols.T, out_residual[first : first + n].reshape(-1, features))
        return {
            "filters": self.store_gradient(total).reshape(shape),
            "biases": self.store_gradient(self._channel_sums(out_residual)),
        }

    # Depthwise convolution (section 6.6): window offsets, float32 sums. -------------------

    def depthwise_forward(self, layer: Layer, inputs: list, weights: dict) -> list:
        padded, filters = self._pad(inputs[0], layer), self._acc(weights["filters"])
        out = self.xp.empty((inputs[0].shape[0], *layer.out_shapes[0]), dtype=self.xp.float32)
        out[...] = self._acc(weights["biases"])
        for rx, ry, index in offsets(layer):
            out += self._acc(padded[index]) * filters[rx, ry]
        return [self.store(out)]

    def depthwise_backward(
        self, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
    ) -> list:
        residual, filters = self._acc(out_residuals[0]), self._acc(weights["filters"])
        padded = self._padded_zeros(layer, residual.shape[0])
        for rx, ry, index in offsets(layer):
            padded[index] += residual * filters[rx, ry]
        return [self._map(crop(padded, layer))]

    def depthwise_gradient(self, layer: Layer, x, out_residual) -> dict:
        padded, residual = self._pad(x, layer), self._acc(out_residual)
        filters_grad = self.xp.empty(layer.weight_shapes["filters"], dtype=self.xp.float32)
        for rx, ry, index in offsets(layer):
            filters_grad[rx, ry] = (self._acc(padded[index]) * residual).sum(axis=(0, 1, 2))
        return {
            "filters": self.store_gradient(filters_grad),
            "biases": self.store_gradient(self._channel_sums(out_residual)),
        }

    # Pooling (section 6.2): padding is the value 0, the divisor Rx*Ry (docs/standard.md §4).

    def maxpool_forward(self, layer: Layer, inputs: list, weights: dict) -> list:
        padded = self._pad(inputs[0], layer)  # zeros: a padding position counts as 0
        windows = (padded[index] for _, _, index in offsets(layer))
        out = self.xp.array(next(windows), copy=True)
        for window in windows:
            self.xp.maximum(out, window, out=out)
        return [out]

    def maxpool_backward(
        self, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
    ) -> list:
        # OUT_D goes to every in-bounds input equal to the output (all tied maxima),
        # summed over overlapping windows; crop drops what landed on padding.
        padded, out = self._pad(inputs[0], layer), outputs[0]
        residual = self._acc(out_residuals[0])
        zero = self.xp.zeros((), dtype=self.xp.float32)
        grad = self._padded_zeros(layer, residual.shape[0])
        for _, _, index in offsets(layer):
            grad[index] += self.xp.where(padded[index] == out, residual, zero)
        return [self._map(crop(grad, layer))]

    def avgpool_forward(self, layer: Layer, inputs: list, weights: dict) -> list:
        x, window = inputs[0], layer.params["Rx"] * layer.params["Ry"]
        if is_global(layer):
            return [self.store(x.sum(axis=(1, 2), keepdims=True, dtype=self.xp.float32) / window)]
        padded = self._pad(x, layer)
        total = self.xp.zeros((x.shape[0], *layer.out_shapes[0]), dtype=self.xp.float32)
        for _, _, index in offsets(layer):
            total += self._acc(padded[index])
        return [self.store(total / window)]

    def avgpool_backward(
        self, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
    ) -> list:
        share = self._acc(out_residuals[0]) / (layer.params["Rx"] * layer.params["Ry"])
        batch = share.shape[0]
        if is_global(layer):
            return [self._map(self.xp.broadcast_to(share, (batch, *layer.in_shapes[0])))]
        grad = self._padded_zeros(layer, batch)
        for _, _, index in offsets(layer):
            grad[index] += share
        return [self._map(crop(grad, layer))]

    # ReLU (6.3), elementwise addition (6.7). ---------------------------------------------

    def relu_forward(self, layer: Layer, inputs: list, weights: dict) -> list:
        x = inputs[0]
        return [self.xp.where(x > 0, x, self.xp.zeros((), dtype=x.dtype))]

    def relu_backward(
        self, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
    ) -> list:
        # docs/standard.md §4: decided on IN, not OUT.
        residual = out_residuals[0]
        zero = self.xp.zeros((), dtype=residual.dtype)
        return [self.xp.where(inputs[0] > 0, residual, zero)]

    def eltwise_forward(self, layer: Layer, inputs: list, weights: dict) -> list:
        # The storage type's own addition rounds the exact sum once (float16 arithmetic is
        # done in float32, which has the bits to round it correctly); bfloat16-in-float32 is
        # rounded by ``store``.
        return [self.store(inputs[0] + inputs[1])]

    def eltwise_backward(
        self, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
    ) -> list:
        return eltwise_in_residuals(out_residuals)

    # Concat (6.4), split (6.5), shuffle (6.9): copies. -----------------------------------

    def concat_forward(self, layer: Layer, inputs: list, weights: dict) -> list:
        return [self.xp.concatenate(inputs, axis=3)]

    def concat_backward(
        self, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
    ) -> list:
        parts = channel_parts(out_residuals[0], layer.in_shapes[0][2])
        return [self.xp.ascontiguousarray(part) for part in parts]

    def split_forward(self, layer: Layer, inputs: list, weights: dict) -> list:
        # Copies, not views of IN (reference/split.py says why).
        parts = channel_parts(inputs[0], layer.params["L1"])
        return [self.xp.ascontiguousarray(part) for part in parts]

    def split_backward(
        self, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
    ) -> list:
        return [self.xp.concatenate(out_residuals, axis=3)]

    def shuffle_forward(self, layer: Layer, inputs: list, weights: dict) -> list:
        return [shuffle(layer, inputs[0], self.xp.ascontiguousarray)]

    def shuffle_backward(
        self, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
    ) -> list:
        return [shuffle(layer, out_residuals[0], self.xp.ascontiguousarray, inverse=True)]

    # Fully connected (section 6.8): one GEMM on the map reordered to (l, x, y). -----------

    def fc_forward(self, layer: Layer, inputs: list, weights: dict) -> list:
        x, matrix = inputs[0], weights["weights"]
        rows = self._gemm(lxy(x, self.xp.ascontiguousarray), matrix.reshape(matrix.shape[0], -1).T)
        rows += self._acc(weights["biases"])
        return [self.store(rows).reshape(x.shape[0], 1, 1, -1)]

    def fc_backward(
        self, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
    ) -> list:
        residual, matrix = out_residuals[0], weights["weights"]
        batch = residual.shape[0]
        rows = self._gemm(residual.reshape(batch, -1), matrix.reshape(matrix.shape[0], -1))
        return [self._map(from_lxy(rows, layer))]

    def fc_gradient(self, layer: Layer, x, out_residual) -> dict:
        residual = out_residual.reshape(out_residual.shape[0], -1)
        weights_grad = self._gemm(residual.T, lxy(x, self.xp.ascontiguousarray))
        return {
            "weights": self.store_gradient(weights_grad).reshape(layer.weight_shapes["weights"]),
            "biases": self.store_gradient(residual.sum(axis=0, dtype=self.xp.float32)),
        }
