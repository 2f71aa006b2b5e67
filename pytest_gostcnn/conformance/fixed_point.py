"""Section 8 in an integer type: the draws quantised, the float64 reference on the quantised
values, the scales it fixes, and СКОП from the fixed-point model (docs/standard.md §6,
"Integer inference"; docs/verification.md derives the terms).

The model's only roundings are requantisations: each is an error of at most s/2 of the
output's scale, modelled as uniform (variance s^2/12) and carried through the later
layers by the error model's rules (``error_model.RULES``) with no other rounding: products
and their sums are exact in the accumulator.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pytest_gostcnn.model import executor
from pytest_gostcnn.model.data import INPUT_RANGE, WEIGHT_RANGE, draw_input, draw_weights
from pytest_gostcnn.model.dtypes import Precision
from pytest_gostcnn.model.fixed_point import (
    REACH,
    REQUANTISING,
    IntegerType,
    LayerScales,
    ScaleTable,
    output_scales,
    quantise,
    quantise_bias,
    requantises,
    scale_of,
    weight_scales,
)
from pytest_gostcnn.model.layers import Layer
from pytest_gostcnn.model.network import Network

from .error_kernels import ErrorModelKernels
from .error_model import ValueAndVariance

# Average pooling: how much more the window's propagated errors keep of their variance than
# independent errors would (docs/verification.md, "int8 and int16", has the measurements).
CORRELATION = 4.0
# No rounding but the requantisations, which FixedPointKernels adds itself.
EXACT = Precision(0.0, 0.0, 0.0, lambda a: np.asarray(a, dtype=np.float64), underflow=0.0)


class Scaled(ValueAndVariance):
    """A reference array on (or, computed, near) the grid of ``scale``, with its error model."""

    __slots__ = ("scale",)

    def __init__(self, value: np.ndarray, var: np.ndarray, scale: float) -> None:
        super().__init__(value, var, 0.0, 0.0)
        self.scale = scale


def on_grid(q: np.ndarray, scale: float) -> Scaled:
    """The array the integers ``q`` at ``scale`` stand for, exactly: no error."""
    value = np.asarray(q, dtype=np.float64) * scale
    return Scaled(value, np.zeros_like(value), scale)


def quantised(values: np.ndarray, itype: IntegerType) -> tuple[np.ndarray, Scaled]:
    """A drawn array as the integers handed to the backend, and as the reference reads them."""
    scale = scale_of(values, itype)
    q = quantise(values, scale, itype)
    return q, on_grid(q, scale)


# A saturating layer item (``prepare_layer(saturating=True)``): its output's scale reaches
# only this far into the reference's magnitudes, so about this share of them lie past the
# range and the model's clamp decides them (docs/verification.md, "int8 and int16").
SATURATED_SHARE = 0.1


def saturating_scale(values: np.ndarray, itype: IntegerType) -> float:
    """A scale that leaves about ``SATURATED_SHARE`` of ``values`` past the range."""
    magnitudes = np.abs(np.asarray(values, dtype=np.float64)).ravel()
    if not magnitudes.size:
        return 1.0
    reach = float(np.quantile(magnitudes, 1.0 - SATURATED_SHARE))
    return reach / (itype.largest + REACH) if reach > 0 else scale_of(values, itype)


class OutOfRange(ValueError):
    """A reference value beyond a fixed (calibrated) scale's range: no verdict on the data."""


class FixedPointKernels(ErrorModelKernels):
    """The float64 reference of integer inference with the fixed-point model's error: it
    fixes each output map's scale as it computes the map, and quantises each layer's biases
    at s_in * s_w as it reaches the layer (``table``, ``biases``)."""

    def __init__(
        self,
        itype: IntegerType,
        fixed: ScaleTable | None = None,
        margin: float = 1.0,
        saturating: bool = False,
    ) -> None:
        """``fixed``: the scales were fixed before (a benchmark's calibration): the model
        follows them, its weights' biases already integers, and a value of the reference
        beyond a map's range is no verdict (``OutOfRange``). ``margin``: the calibration's
        room above each computed map's range (``output_scales``). ``saturating``: a layer
        that requantises gets an output scale too small for its values
        (``saturating_scale``), and the reference clamps them as the model's q does."""
        super().__init__(EXACT)
        self.itype, self.fixed, self.margin = itype, fixed, margin
        self.saturating = saturating
        self.table: ScaleTable = {}
        self.biases: dict[int, np.ndarray] = {}

    def forward(self, layer: Layer, inputs: list, weights: dict) -> list:
        if self.fixed is not None:
            return self._forward_fixed(layer, inputs, weights)
        in_scales = tuple(x.scale for x in inputs)
        scales_w: dict[str, float] = {}
        if layer.has_weights:
            name = next(k for k in layer.weight_shapes if k != "biases")
            scales_w = weight_scales(layer, in_scales[0], weights[name].scale)
            q = quantise_bias(weights["biases"].value, scales_w["biases"], self.itype, layer.number)
            self.biases[layer.number] = q
            weights["biases"] = on_grid(q, scales_w["biases"])  # the reference's bias too
        outputs = super().forward(layer, inputs, weights)
        values = [o.value for o in outputs]
        out_scales = output_scales(layer, in_scales, values, self.itype, self.margin)
        if self.saturating and layer.type.name in REQUANTISING:
            out_scales = tuple(saturating_scale(v, self.itype) for v in values)
        scales = LayerScales(in_scales, out_scales, scales_w)
        self.table[layer.number] = scales
        result = self._requantised(layer, scales, outputs)
        return [self._clamped(r) for r in result] if self.saturating else result

    def _clamped(self, output: Scaled) -> Scaled:
        """The model's value of an output past its range: the range's end, exactly (an
        implementation's clamp lands on it, so no rounding error is left there)."""
        low, high = self.itype.smallest * output.scale, self.itype.largest * output.scale
        value = np.clip(output.value, low, high)
        var = np.where((value == low) | (value == high), 0.0, output.var)
        return Scaled(value, var, output.scale)

    def _forward_fixed(self, layer: Layer, inputs: list, weights: dict) -> list:
        scales = self.fixed[layer.number]
        outputs = super().forward(layer, inputs, weights)
        limit = (self.itype.largest + 0.5) * np.array(scales.outputs)
        for output, bound in zip(outputs, limit, strict=True):
            largest = float(np.max(np.abs(output.value))) if output.value.size else 0.0
            if largest > bound:
                raise OutOfRange(
                    f"the float64 reference reaches {largest:.3g} at row {layer.number}, beyond "
                    f"the {bound:.3g} its calibrated scale holds: no verdict on this data"
                )
        return self._requantised(layer, scales, outputs)

    def _requantised(self, layer: Layer, scales: LayerScales, outputs: list) -> list:
        """The outputs with the requantisations' variance s^2/12 where the layer rounds."""
        rounds = requantises(layer, scales)
        result = []
        for output, scale in zip(outputs, scales.outputs, strict=True):
            var = np.array(output.var, dtype=np.float64)
            if layer.type.name == "concat":
                first = layer.in_shapes[0][2]
                parts = (var[..., :first], var[..., first:])
                for part, rounded in zip(parts, rounds, strict=True):
                    if rounded:
                        part += scale * scale / 12
            elif rounds[0]:
                var += scale * scale / 12
            result.append(Scaled(output.value, var, scale))
        return result

    def _forward_relu(self, layer, module, inputs, weights, values) -> list:
        # ReLU is 1-Lipschitz, but passing the whole variance wherever a decision is
        # uncertain (the float types' rule) doubles a fixed-point error at every layer once
        # it nears the values: int8's errors are a few quanta, not a few ulps. Here the
        # error is e ~ N(0, var) and the output's error relu(x + e) - relu(x) has the
        # variance ``relu_variance``: var where x >> sd, 0 where x << -sd, var/2 at 0.
        x = inputs[0]
        return [ValueAndVariance(values[0], relu_variance(x.value, x.var), 0.0, 0.0)]

    def _forward_avgpool(self, layer, module, inputs, weights, values) -> list:
        # The window's errors are not independent: each came through windows that overlap
        # their neighbours' (a 3x3 window shares 6 of its 9 inputs with the next), so they
        # average down less than var/R. The rule keeps CORRELATION times var/R.
        [out] = super()._forward_avgpool(layer, module, inputs, weights, values)
        return [ValueAndVariance(out.value, CORRELATION * out.var, 0.0, 0.0)]

    def backward(self, *args, **kwargs):
        raise ValueError("the fixed-point model covers inference only (docs/standard.md §6)")


def _normal_cdf(t: np.ndarray) -> np.ndarray:
    """Phi(t), by Abramowitz and Stegun 7.1.26 (absolute error below 1.5e-7)."""
    z = np.abs(t) / np.sqrt(2.0)
    k = 1.0 / (1.0 + 0.3275911 * z)
    poly = k * (
        0.254829592 + k * (-0.284496736 + k * (1.421413741 + k * (-1.453152027 + k * 1.061405429)))
    )
    erf = 1.0 - poly * np.exp(-z * z)
    return 0.5 * (1.0 + np.sign(t) * erf)


def relu_variance(x: np.ndarray, var: np.ndarray) -> np.ndarray:
    """E[(relu(x + e) - relu(x))^2] for e ~ N(0, var): with t = x / sd, Phi and phi the
    normal distribution and density, var * ((t^2 + 1) Phi(t) + t phi(t)) for x < 0 and
    var * (Phi(t) - t phi(t) + t^2 Phi(-t)) for x >= 0 (docs/verification.md)."""
    sd = np.sqrt(var)
    t = np.divide(x, sd, out=np.zeros_like(x), where=sd > 0)
    t = np.clip(t, -40.0, 40.0)
    cdf, density = _normal_cdf(t), np.exp(-0.5 * t * t) / np.sqrt(2 * np.pi)
    below = (t * t + 1) * cdf + t * density
    above = cdf - t * density + t * t * (1 - cdf)
    share = np.where(x < 0, below, above)
    return np.where(sd > 0, var * np.clip(share, 0.0, 1.0), 0.0)


@dataclass(frozen=True)
class IntegerNetworkData:
    """One network's integer inference: what the backend is handed and the reference."""

    weights: executor.Weights
    image: np.ndarray
    scales: ScaleTable
    reference: Scaled


def prepare_network(
    network: Network, batch: int, rng: np.random.Generator, reading: str, itype: IntegerType
) -> IntegerNetworkData:
    """Section 8's draws for ``network``, quantised (weights per array, the input per
    batch), the reference on them, its scales and the integer biases."""
    drawn = draw_weights(network, rng, reading)
    return quantise_network(network, drawn, draw_input(network, batch, rng), itype)


# A benchmark's calibration: the input's scale from the draw's range (every image of
# section 9 is drawn from it), each computed map's from the calibration batch's range with
# this much room for the other images.
CALIBRATION_MARGIN = 2.0


def input_scale(itype: IntegerType) -> float:
    """The scale of section 9's input U(-127, 128), from its bounds as ``scale_of`` would."""
    return scale_of(np.array(INPUT_RANGE), itype)


def calibrate(
    network: Network, drawn: executor.Weights, images: np.ndarray, itype: IntegerType
) -> IntegerNetworkData:
    """A benchmark's integer weights and scales, fixed once from its drawn weights and one
    batch of its images (``CALIBRATION_MARGIN``)."""
    return quantise_network(
        network, drawn, images, itype, input_scale(itype), margin=CALIBRATION_MARGIN
    )


def quantise_network(
    network: Network,
    drawn: executor.Weights,
    image: np.ndarray,
    itype: IntegerType,
    image_scale: float | None = None,
    margin: float = 1.0,
) -> IntegerNetworkData:
    """``drawn`` weights and ``image`` quantised (the image at ``image_scale``, by default
    its own range), the reference on them with its scales, and the integer biases."""
    if image_scale is None:
        image, ref_image = quantised(image, itype)
    else:
        image = quantise(image, image_scale, itype)
        ref_image = on_grid(image, image_scale)
    host: executor.Weights = {}
    ref_weights: dict[int, dict] = {}
    for number, arrays in drawn.items():
        host[number], ref_weights[number] = {}, {}
        for name, values in arrays.items():
            if name == "biases":  # quantised at s_in * s_w when the reference reaches the row
                ref_weights[number][name] = ValueAndVariance(values, np.zeros_like(values), 0.0)
                continue
            host[number][name], ref_weights[number][name] = quantised(values, itype)
    model = FixedPointKernels(itype, margin=margin)
    reference = executor.infer(network, model, ref_weights, ref_image)
    for number, q in model.biases.items():
        host[number]["biases"] = q
    return IntegerNetworkData(host, image, model.table, reference)


@dataclass(frozen=True)
class IntegerLayerData:
    """One layer's integer forward: the integer draws, the scales and the reference."""

    inputs: list[np.ndarray]
    weights: dict[str, np.ndarray]
    scales: ScaleTable
    reference: list[Scaled]


def prepare_layer(
    layer: Layer,
    batch: int,
    seed: int,
    itype: IntegerType,
    draw: Callable[[np.random.Generator, tuple[int, ...]], np.ndarray] | None = None,
    saturating: bool = False,
) -> IntegerLayerData:
    """Section 8's draws for one layer (inputs U(-127, 128) or ``draw``, weights U(-1, 1)),
    each quantised at its own scale, and the reference forward on them. ``saturating``: the
    output's scale leaves about ``SATURATED_SHARE`` of its values past the range."""
    rng = np.random.default_rng(seed)
    draw = draw or (lambda g, shape: g.uniform(*INPUT_RANGE, size=shape))
    pairs = [quantised(draw(rng, (batch, *s)), itype) for s in layer.in_shapes]
    host_weights, ref_weights = {}, {}
    for name, shape in layer.weight_shapes.items():
        values = rng.uniform(*WEIGHT_RANGE, size=shape)
        if name == "biases":
            ref_weights[name] = ValueAndVariance(values, np.zeros_like(values), 0.0)
        else:
            host_weights[name], ref_weights[name] = quantised(values, itype)
    model = FixedPointKernels(itype, saturating=saturating)
    reference = model.forward(layer, [p[1] for p in pairs], ref_weights)
    if layer.has_weights:
        host_weights["biases"] = model.biases[layer.number]
    return IntegerLayerData([p[0] for p in pairs], host_weights, model.table, reference)


def fixed_reference(
    network: Network,
    weights: executor.Weights,
    image: np.ndarray,
    scales: ScaleTable,
    itype: IntegerType,
) -> tuple[np.ndarray, Scaled]:
    """The reference of one more input under fixed scales (a benchmark round's check): the
    integer ``weights`` the backend holds, ``image`` quantised at the input's scale; the
    image's integers and the reference output. ``OutOfRange`` where it leaves a range."""
    first = scales[network.layers[0].number].inputs[0]
    q = quantise(image, first, itype)
    ref_weights = {}
    for number, arrays in weights.items():
        layer_scales = scales[number].weights
        ref_weights[number] = {k: on_grid(a, layer_scales[k]) for k, a in arrays.items()}
    model = FixedPointKernels(itype, fixed=scales)
    return q, executor.infer(network, model, ref_weights, on_grid(q, first))


def scale_record(scales: ScaleTable) -> dict[str, dict]:
    """The scale table as the report keeps it: by row number, as text keys."""
    return {str(number): s.as_dict() for number, s in sorted(scales.items())}
