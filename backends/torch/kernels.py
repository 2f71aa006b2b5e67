"""The layer kernels of the PyTorch backend: the standard's semantics on PyTorch operators.

Maps are torch tensors shaped as the standard's arrays, [B][X][Y][L] in C order, which is
PyTorch's NCHW in channels-last memory: ``nchw(map)`` is a view, no copy, and oneDNN or
cuDNN keep that layout in what they return. PyTorch's operators are used where they agree
with the standard (docs/standard.md §4); where they do not, a small exact correction:

- max pooling: PyTorch pads with -inf and sends OUT_D to one of tied maxima. Forward pads
  with zeros first (``F.pad``), then ``max_pool2d`` over the padded map, which is then the
  standard's; backward sends OUT_D to every input equal to its window's maximum, one
  comparison per window offset, summed where windows overlap.
- average pooling: the map padded with zeros, then ``avg_pool2d`` unpadded: the divisor is
  always Rx*Ry, whatever PyTorch's limits on its own padding.
- fully connected: the map reordered to (l, x, y), the order of WEIGHTS' last indices.
- ReLU's backward decides on IN (``threshold_backward`` on the input), never on OUT.

Backward needs OUT only for max pooling (it recomputes the maxima when none is given).
Data types (``arithmetic.py``): convolutions and products take their operands through
``Arithmetic.factor``; pooling sums and the gradients of weights run in float32; each result
is rounded once to the storage type.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from pytest_gostcnn.model.layers import Layer
from pytest_gostcnn.reference._window import crop, offsets

from ..common import channel_parts, eltwise_in_residuals, is_global, kernel, shuffle, update
from .arithmetic import Arithmetic

convolution_backward = torch.ops.aten.convolution_backward
avg_pool2d_backward = torch.ops.aten.avg_pool2d_backward
threshold_backward = torch.ops.aten.threshold_backward


def nchw(a: torch.Tensor) -> torch.Tensor:
    """A [B][X][Y][L] map as PyTorch's [B][L][X][Y] (H = X, W = Y): a channels-last view."""
    return a.permute(0, 3, 1, 2)


def to_map(a: torch.Tensor) -> torch.Tensor:
    """An NCHW result as a contiguous [B][X][Y][L] map (a view when it is channels last)."""
    return a.permute(0, 2, 3, 1).contiguous()


def _contiguous(a: torch.Tensor) -> torch.Tensor:
    return a.contiguous()


def pad_map(a: torch.Tensor, layer: Layer) -> torch.Tensor:
    """``a`` with Px / Py zero rows and columns on each side (docs/standard.md §4)."""
    px, py = layer.params["Px"], layer.params["Py"]
    if px == py == 0:
        return a
    return F.pad(a, (0, 0, py, py, px, px))


def _shape_only(like: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """An uninitialised operand of which PyTorch reads only the shape (the filters of a
    weight gradient), channels last as the maps are."""
    return torch.empty(
        shape, dtype=like.dtype, device=like.device, memory_format=torch.channels_last
    )


def _in_shaped(like: torch.Tensor, layer: Layer) -> torch.Tensor:
    """An uninitialised NCHW operand shaped as the layer's IN, of which PyTorch reads only
    the shape (the input of IN_D's convolution backward)."""
    width, height, channels = layer.in_shapes[0]
    return _shape_only(like, (like.shape[0], channels, width, height))


def lxy(x: torch.Tensor) -> torch.Tensor:
    """IN [B][X][Y][L] as [B][L*X*Y], the order of FC WEIGHTS' last three indices."""
    batch, width, height, channels = x.shape
    if width * height == 1:
        return x.reshape(batch, channels)
    return x.permute(0, 3, 1, 2).reshape(batch, -1)


def from_lxy(rows: torch.Tensor, layer: Layer) -> torch.Tensor:
    """FC's IN_D rows [B][L*X*Y] as a contiguous [B][X][Y][L] map."""
    width, height, channels = layer.in_shapes[0]
    return rows.reshape(rows.shape[0], channels, width, height).permute(0, 2, 3, 1).contiguous()


def conv_filters(filters: torch.Tensor) -> torch.Tensor:
    """FILTERS [Rx][Ry][L][F] as PyTorch's [F][L][Rx][Ry] (a view)."""
    return filters.permute(3, 2, 0, 1)


def depthwise_filters(filters: torch.Tensor) -> torch.Tensor:
    """Depthwise FILTERS [Rx][Ry][L] as PyTorch's grouped [L][1][Rx][Ry] (a view)."""
    return filters.permute(2, 0, 1).unsqueeze(1)


class TorchKernels:
    """The executor's four layer steps (``executor.Kernels``) on PyTorch tensors, in the
    data type ``arithmetic`` describes (float32 when none is given).

    Kernels never write into their arguments; ``update`` changes ``weights`` in place (or
    replaces a float16 weight by its float32 master).
    """

    def __init__(self, arithmetic: Arithmetic | None = None) -> None:
        self.arithmetic = arithmetic or Arithmetic.of("float32", torch.device("cpu"))
        self.store = self.arithmetic.store
        self.factor = self.arithmetic.factor

    # The executor's steps. ----------------------------------------------------------------

    def forward(self, layer: Layer, inputs: list, weights: dict) -> list:
        return kernel(self, layer, "forward")(layer, inputs, self.arithmetic.working(weights))

    def backward(
        self, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
    ) -> list:
        step = kernel(self, layer, "backward")
        return step(layer, inputs, outputs, out_residuals, self.arithmetic.working(weights))

    def gradient(self, layer: Layer, inputs: list, out_residuals: list) -> dict:
        grads = kernel(self, layer, "gradient")(layer, inputs[0].float(), out_residuals[0].float())
        return {name: grad.to(self.arithmetic.master) for name, grad in grads.items()}

    def update(self, layer: Layer, weights: dict, grads: dict, batch: int) -> None:
        master = self.arithmetic.master
        for name, w in weights.items():
            if w.dtype != master:  # a float16 weight as loaded becomes its float32 master
                weights[name] = w.to(master)
        update(weights, grads, batch, _rounded_update)  # W += W_D / B

    # Convolution (section 6.1) and depthwise convolution (section 6.6). -------------------

    def _conv(self, layer: Layer, x, filters, biases, groups: int) -> list:
        p = layer.params
        x, filters, biases = self.factor(x), self.factor(filters), self.arithmetic.bias(biases)
        out = F.conv2d(nchw(x), filters, biases, p["S"], (p["Px"], p["Py"]), groups=groups)
        return [self.store(to_map(out))]

    def _conv_backward(self, layer: Layer, x, residual, filters, groups: int, mask: list):
        """PyTorch's convolution backward on the operands as given: IN_D (``mask`` [True,
        False, False]; of ``x``, NCHW, it reads the shape) or the filters' gradient ([False,
        True, False]; of ``filters`` it reads the shape)."""
        p = layer.params
        return convolution_backward(
            nchw(residual),
            x,
            filters,
            None,
            [p["S"], p["S"]],
            [p["Px"], p["Py"]],
            [1, 1],
            False,
            [0, 0],
            groups,
            mask,
        )

    def conv_forward(self, layer: Layer, inputs: list, weights: dict) -> list:
        filters = conv_filters(weights["filters"])
        return self._conv(layer, inputs[0], filters, weights["biases"], 1)

    def conv_backward(
        self, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
    ) -> list:
        residual = self.factor(out_residuals[0])
        filters = self.factor(conv_filters(weights["filters"]))
        grad = self._conv_backward(
            layer, _in_shaped(residual, layer), residual, filters, 1, [True, False, False]
        )
        return [self.store(to_map(grad[0]))]

    def conv_gradient(self, layer: Layer, x, out_residual) -> dict:
        rx, ry, channels, features = layer.weight_shapes["filters"]
        filters = _shape_only(x, (features, channels, rx, ry))
        grad = self._conv_backward(layer, nchw(x), out_residual, filters, 1, [False, True, False])
        return {
            "filters": grad[1].permute(2, 3, 1, 0).contiguous(),
            "biases": out_residual.sum(dim=(0, 1, 2)),
        }

    def depthwise_forward(self, layer: Layer, inputs: list, weights: dict) -> list:
        filters = depthwise_filters(weights["filters"])
        return self._conv(layer, inputs[0], filters, weights["biases"], inputs[0].shape[3])

    def depthwise_backward(
        self, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
    ) -> list:
        residual = self.factor(out_residuals[0])
        filters = self.factor(depthwise_filters(weights["filters"]))
        channels = layer.in_shapes[0][2]
        grad = self._conv_backward(
            layer, _in_shaped(residual, layer), residual, filters, channels, [True, False, False]
        )
        return [self.store(to_map(grad[0]))]

    def depthwise_gradient(self, layer: Layer, x, out_residual) -> dict:
        rx, ry, channels = layer.weight_shapes["filters"]
        filters = _shape_only(x, (channels, 1, rx, ry))
        mask = [False, True, False]
        grad = self._conv_backward(layer, nchw(x), out_residual, filters, channels, mask)
        return {
            "filters": grad[1][:, 0].permute(1, 2, 0).contiguous(),
            "biases": out_residual.sum(dim=(0, 1, 2)),
        }

    # Pooling (section 6.2): padding is the value 0, the divisor Rx*Ry. --------------------

    def _pool_geometry(self, layer: Layer) -> tuple[tuple[int, int], int]:
        p = layer.params
        return (p["Rx"], p["Ry"]), p["S"]

    def maxpool_forward(self, layer: Layer, inputs: list, weights: dict) -> list:
        window, stride = self._pool_geometry(layer)
        padded = pad_map(inputs[0], layer)  # zeros: a padding position counts as 0
        return [to_map(F.max_pool2d(nchw(padded), window, stride))]

    def maxpool_backward(
        self, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
    ) -> list:
        # OUT_D goes to every in-bounds input equal to its window's maximum (all tied
        # maxima), summed over overlapping windows; the crop drops what landed on padding.
        padded = pad_map(inputs[0], layer)
        out = outputs[0] if outputs else self.maxpool_forward(layer, inputs, weights)[0]
        residual = out_residuals[0].float()  # summed in float32, rounded once
        grad = torch.zeros(padded.shape, dtype=torch.float32, device=padded.device)
        zero = residual.new_zeros(())
        for _, _, index in offsets(layer):
            grad[index] += torch.where(padded[index] == out, residual, zero)
        return [self.store(crop(grad, layer)).contiguous()]

    def avgpool_forward(self, layer: Layer, inputs: list, weights: dict) -> list:
        window, stride = self._pool_geometry(layer)
        x = inputs[0].float()  # sums in float32, each rounded once
        if is_global(layer):
            return [self.store(x.sum(dim=(1, 2), keepdim=True) / (window[0] * window[1]))]
        return [self.store(to_map(F.avg_pool2d(nchw(pad_map(x, layer)), window, stride)))]

    def avgpool_backward(
        self, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
    ) -> list:
        window, stride = self._pool_geometry(layer)
        residual = out_residuals[0].float()  # sums in float32, each rounded once
        if is_global(layer):
            share = self.store(residual / (window[0] * window[1]))
            return [share.expand(residual.shape[0], *layer.in_shapes[0]).contiguous()]
        # The padded input's shape, all PyTorch reads of it: backward is not given IN here
        # (Layer.given_to_backward, docs/backends.md).
        width, height, channels = layer.in_shapes[0]
        px, py = layer.params["Px"], layer.params["Py"]
        padded = _shape_only(
            residual, (residual.shape[0], channels, width + 2 * px, height + 2 * py)
        )
        grad = avg_pool2d_backward(
            nchw(residual), padded, window, stride, [0, 0], False, True, None
        )
        return [self.store(crop(grad.permute(0, 2, 3, 1), layer)).contiguous()]

    # ReLU (6.3), elementwise addition (6.7). ---------------------------------------------

    def relu_forward(self, layer: Layer, inputs: list, weights: dict) -> list:
        return [torch.relu(inputs[0])]

    def relu_backward(
        self, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
    ) -> list:
        # docs/standard.md §4: decided on IN (OUT_D where IN > 0), not on OUT.
        return [threshold_backward(out_residuals[0], inputs[0], 0)]

    def eltwise_forward(self, layer: Layer, inputs: list, weights: dict) -> list:
        return [inputs[0] + inputs[1]]

    def eltwise_backward(
        self, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
    ) -> list:
        return eltwise_in_residuals(out_residuals)

    # Concat (6.4), split (6.5), shuffle (6.9): copies. -----------------------------------

    def concat_forward(self, layer: Layer, inputs: list, weights: dict) -> list:
        return [torch.cat(inputs, dim=3)]

    def concat_backward(
        self, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
    ) -> list:
        parts = channel_parts(out_residuals[0], layer.in_shapes[0][2])
        return [part.contiguous() for part in parts]

    def split_forward(self, layer: Layer, inputs: list, weights: dict) -> list:
        # Copies, not views of IN (reference/split.py says why).
        return [part.contiguous() for part in channel_parts(inputs[0], layer.params["L1"])]

    def split_backward(
        self, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
    ) -> list:
        return [torch.cat(out_residuals, dim=3)]

    def shuffle_forward(self, layer: Layer, inputs: list, weights: dict) -> list:
        return [shuffle(layer, inputs[0], _contiguous)]

    def shuffle_backward(
        self, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
    ) -> list:
        return [shuffle(layer, out_residuals[0], _contiguous, inverse=True)]

    # Fully connected (section 6.8): the map reordered to (l, x, y). -----------------------

    def fc_forward(self, layer: Layer, inputs: list, weights: dict) -> list:
        x, matrix = self.factor(inputs[0]), self.factor(weights["weights"])
        biases = self.arithmetic.bias(weights["biases"])
        rows = F.linear(lxy(x), matrix.reshape(matrix.shape[0], -1), biases)
        return [self.store(rows).reshape(x.shape[0], 1, 1, -1)]

    def fc_backward(
        self, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
    ) -> list:
        residual, matrix = self.factor(out_residuals[0]), self.factor(weights["weights"])
        rows = residual.reshape(residual.shape[0], -1) @ matrix.reshape(matrix.shape[0], -1)
        return [from_lxy(self.store(rows), layer)]

    def fc_gradient(self, layer: Layer, x, out_residual) -> dict:
        residual = out_residual.reshape(out_residual.shape[0], -1)
        return {
            "weights": (residual.T @ lxy(x)).reshape(layer.weight_shapes["weights"]),
            "biases": residual.sum(dim=0),
        }


def _rounded_update(w: torch.Tensor, grad: torch.Tensor, batch: int) -> torch.Tensor | None:
    """W + W_D / B in float32, rounded once to ``w``'s type; None for a float32 weight,
    which ``update`` adds to in place."""
    if w.dtype == torch.float32:
        return None
    return (w.float() + grad.float() / batch).to(w.dtype)
