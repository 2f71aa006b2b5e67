"""int8 inference on PyTorch's CPU quantized engine QNNPACK, under the fixed-point model of
docs/standard.md §6: maps held as int8, filters and FC weights as int8, biases as int32.

QNNPACK keeps the model: products of integers summed exactly in int32, the bias added as
the integers at s_in * s_w, each output requantised to its own scale, rounded to nearest
(ties to even) and saturated (docs/backends.md, "The PyTorch backend", has the evidence,
``benchmarks/torch_quantized_engines.py`` reproduces it). PyTorch's other CPU engines
(fbgemm, onednn, x86) multiply with AVX2's VPMADDUBSW where the CPU has no VNNI, which
saturates pairs of products at int16: sums that are not exact. The layers without products
run here on exact float64 copies of the integers, requantised in float64.
"""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F

from pytest_gostcnn.model.fixed_point import LayerScales
from pytest_gostcnn.model.layers import Layer

from .kernels import TorchKernels, lxy, nchw, pad_map, to_map

ENGINE = "qnnpack"
# QNNPACK takes the bias as float32 and divides it by s_in * s_w again: the integers come
# back exactly while float32 holds them to within a quarter (below 2^23).
EXACT_BIAS = 2**23
# An int8 map as QNNPACK's unsigned one: q + 128, at zero point 128.
ZERO_POINT = 128
# What int8 computes in, for the report's backend facts.
INT8_FACTS = {
    "storage": "int8 maps and weights, int32 biases at s_in * s_w",
    "products": f"int8 x int8 in PyTorch's {ENGINE} engine",
    "sums": "int32, exact; each output requantised to its own scale by the engine, to "
    "nearest (ties to even), saturated",
}


def engine_problem(dtype: str, device: torch.device) -> str | None:
    """Why ``device`` has no integer convolution for ``dtype`` under the model, or None."""
    if device.type != "cpu":
        return f"{dtype} on {device}: PyTorch has no integer convolution for {device.type} devices"
    if dtype != "int8":
        return f"{dtype} on {device}: PyTorch's quantized engines convolve 8-bit integers only"
    if ENGINE not in torch.backends.quantized.supported_engines:
        return (
            f"int8 on {device}: this PyTorch has no {ENGINE} engine, the one of its quantized "
            "engines whose sums are exact on every CPU (docs/backends.md)"
        )
    return None


def _quantised_tensor(integers: torch.Tensor, scale: float, zero_point: int) -> torch.Tensor:
    with warnings.catch_warnings():  # PyTorch 2.13 marks its quantized tensors deprecated
        warnings.simplefilter("ignore", UserWarning)
        return torch._make_per_tensor_quantized_tensor(integers, scale, zero_point)


def _quantised(q: torch.Tensor, scale: float) -> torch.Tensor:
    """int8 integers as a quint8 tensor at ``scale`` (the same values, offset 128)."""
    unsigned = (q.to(torch.int16) + ZERO_POINT).to(torch.uint8)
    return _quantised_tensor(unsigned, scale, ZERO_POINT)


def _integers(out: torch.Tensor) -> torch.Tensor:
    """A quint8 result (zero point 128) as its int8 integers."""
    return (out.int_repr().to(torch.int16) - ZERO_POINT).to(torch.int8)


def requantise(values: torch.Tensor, multiplier: float) -> torch.Tensor:
    """float64 ``values * multiplier`` rounded to nearest (ties to even), saturated, int8."""
    return torch.round(values * multiplier).clamp_(-128, 127).to(torch.int8)


class Int8Kernels:
    """Forward kernels of int8: ``forward(layer, inputs, weights, scales)``; the packed
    weights of each weighted layer made once and kept while its weights are the same."""

    engine = ENGINE

    def __init__(self) -> None:
        torch.backends.quantized.engine = self.engine
        self.floats = TorchKernels()
        self.packed: dict[int, tuple] = {}  # row -> (filters, biases, scales, packed)

    def forward(self, layer: Layer, inputs: list, weights: dict, scales: LayerScales) -> list:
        name = layer.type.name
        if name in ("conv", "depthwise", "fc"):
            return [self.weighted(layer, inputs[0], weights, scales)]
        x64 = [x.double() for x in inputs]  # every int8 value, and every sum here, exact
        if name in ("relu", "maxpool", "split", "shuffle"):  # on the input's grid
            outputs = self.floats.forward(layer, x64, {})
            return [out.to(torch.int8) for out in outputs]
        out = scales.outputs[0]
        if name == "avgpool":
            p = layer.params
            window = (p["Rx"], p["Ry"])
            sums = F.avg_pool2d(nchw(pad_map(x64[0], layer)), window, p["S"], divisor_override=1)
            return [to_map(requantise(sums, scales.inputs[0] / (window[0] * window[1] * out)))]
        if name == "eltwise":
            (a, b), (sa, sb) = x64, scales.inputs
            return [requantise(a * (sa / out) + b * (sb / out), 1.0)]
        if name == "concat":
            parts = [
                x if s == out else requantise(x, s / out).double()
                for x, s in zip(x64, scales.inputs, strict=True)
            ]
            return [torch.cat(parts, dim=3).to(torch.int8)]
        raise ValueError(f"no int8 kernel for layer type {name!r}")

    def weighted(self, layer: Layer, x: torch.Tensor, weights: dict, scales: LayerScales):
        """Conv, depthwise, FC in QNNPACK: the exact int32 sum of products and the bias,
        requantised to the output's scale."""
        s_in, s_out = scales.inputs[0], scales.outputs[0]
        packed = self._packed(layer, weights, scales)
        if layer.type.name == "fc":
            rows = torch.ops.quantized.linear(_quantised(lxy(x), s_in), packed, s_out, ZERO_POINT)
            return _integers(rows).reshape(x.shape[0], 1, 1, -1)
        out = torch.ops.quantized.conv2d(nchw(_quantised(x, s_in)), packed, s_out, ZERO_POINT)
        return to_map(_integers(out))

    def _packed(self, layer: Layer, weights: dict, scales: LayerScales):
        name = "weights" if layer.type.name == "fc" else "filters"
        filters, biases = weights[name], weights["biases"]
        kept = self.packed.get(layer.number)
        if kept is not None and kept[0] is filters and kept[1] is biases and kept[2] == scales:
            return kept[3]
        largest = int(biases.abs().max()) if biases.numel() else 0
        if largest >= EXACT_BIAS:
            raise ValueError(
                f"row {layer.number}: a bias of {largest} quanta; QNNPACK takes biases as "
                f"float32, exact below {EXACT_BIAS}"
            )
        s_w = scales.weights[name]
        bias = (biases.double() * scales.weights["biases"]).float()
        if layer.type.name == "fc":
            w = _quantised_tensor(filters.reshape(filters.shape[0], -1), s_w, 0)
            packed = torch.ops.quantized.linear_prepack(w, bias)
        else:
            p, depthwise = layer.params, layer.type.name == "depthwise"
            shaped = (
                filters.permute(2, 0, 1).unsqueeze(1) if depthwise else filters.permute(3, 2, 0, 1)
            )
            w = _quantised_tensor(shaped.contiguous(), s_w, 0)
            groups = filters.shape[2] if depthwise else 1
            packed = torch.ops.quantized.conv2d_prepack(
                w, bias, [p["S"], p["S"]], [p["Px"], p["Py"]], [1, 1], groups
            )
        self.packed[layer.number] = (filters, biases, scales, packed)
        return packed
