"""Section 8 catches wrong implementations: each mutant of the NumPy backend fails by >= 10x.

A mutant is the float32 NumPy backend with one deliberate mistake. The verification must
call it "not correct", and its worst СКО must be at least ten times its СКОП, so that the
threshold sits far from both correct and wrong implementations.
"""

import gost_test_backends as backends
import numpy as np
import pytest
from gost_helpers import MARGIN
from gost_test_backends import (
    BiasAtOutputScale,
    Int16Accumulator,
    RoundsDown,
    WrapsAround,
    WrongScaleOnOneRow,
)

from pytest_gostcnn.backends.numpy import NumpyBackend
from pytest_gostcnn.conformance.layer_cases import layer_cases, network_cases, saturating_cases
from pytest_gostcnn.conformance.verification import (
    MEAN_ERROR,
    NOT_CORRECT,
    verify_layer,
    verify_network,
)
from pytest_gostcnn.model.layers import make_layer
from pytest_gostcnn.reference import MODULES
from pytest_gostcnn.reference._window import offsets


def assert_fails_by_margin(result):
    assert result.verdict == NOT_CORRECT, result.checks
    assert result.worst.ratio >= MARGIN, result.worst.describe()
    # The ratios docs/verification.md tabulates: pytest tests/test_mutants.py -s
    print(f"{result.subject}: worst СКО/СКОП {result.worst.ratio:.2g} ({result.worst.name})")


class WrongElement(NumpyBackend):
    """One element of every forward output is off by the output's RMS."""

    def forward(self, layer, inputs, weights):
        outputs = [o.copy() for o in super().forward(layer, inputs, weights)]
        outputs[0].flat[0] += np.sqrt(np.mean(outputs[0] ** 2))
        return outputs


class MissingBias(NumpyBackend):
    """Convolutions forget their biases."""

    def forward(self, layer, inputs, weights):
        if layer.type.name == "conv":
            weights = {**weights, "biases": np.zeros_like(weights["biases"])}
        return super().forward(layer, inputs, weights)


class TransposedFC(NumpyBackend):
    """FC reads WEIGHTS as [F][X][Y][L], the map's order, instead of [F][L][X][Y]."""

    def forward(self, layer, inputs, weights):
        if layer.type.name != "fc":
            return super().forward(layer, inputs, weights)
        inp = inputs[0]
        flat = weights["weights"].reshape(weights["weights"].shape[0], -1)
        out = inp.reshape(inp.shape[0], -1) @ flat.T + weights["biases"]
        return [out.reshape(inp.shape[0], 1, 1, -1)]


class MaxPoolMinusInfinity(NumpyBackend):
    """Max pooling pads with -inf, as frameworks do, instead of the standard's 0."""

    def forward(self, layer, inputs, weights):
        if layer.type.name != "maxpool":
            return super().forward(layer, inputs, weights)
        p = layer.params
        padded = np.pad(
            inputs[0],
            ((0, 0), (p["Px"], p["Px"]), (p["Py"], p["Py"]), (0, 0)),
            constant_values=-np.inf,
        )
        windows = [padded[index] for _, _, index in offsets(layer)]
        return [np.maximum.reduce(windows)]


class AvgPoolInBoundsDivisor(NumpyBackend):
    """Average pooling divides by the in-bounds count, as frameworks' count_include_pad=False."""

    def forward(self, layer, inputs, weights):
        if layer.type.name != "avgpool":
            return super().forward(layer, inputs, weights)
        module = MODULES["avgpool"]
        window = layer.params["Rx"] * layer.params["Ry"]
        sums = module.forward(layer, inputs, weights)[0] * window
        counts = module.forward(layer, [np.ones_like(inputs[0])], weights)[0] * window
        return [(sums / counts).astype(np.float32)]


class FCBiasIgnored(NumpyBackend):
    """Fully connected layers forget their biases."""

    def forward(self, layer, inputs, weights):
        if layer.type.name == "fc":
            weights = {**weights, "biases": np.zeros_like(weights["biases"])}
        return super().forward(layer, inputs, weights)


class ConvBiasIgnoredFromRow10(NumpyBackend):
    """Convolutions from row 10 of a network on forget their biases (the first rows keep
    them, as a fused first-layer path would)."""

    def forward(self, layer, inputs, weights):
        if layer.type.name == "conv" and layer.number >= 10:
            weights = {**weights, "biases": np.zeros_like(weights["biases"])}
        return super().forward(layer, inputs, weights)


class ReluInPlace(NumpyBackend):
    """ReLU clamps its input in place and returns a copy: the output is right, the input
    map (which another layer may read) is not."""

    def forward(self, layer, inputs, weights):
        if layer.type.name != "relu":
            return super().forward(layer, inputs, weights)
        np.maximum(inputs[0], 0, out=inputs[0])
        return [inputs[0].copy()]


class ThreeChannelsReversed(NumpyBackend):
    """A convolution on three input channels (an image's first layer) reads them in reverse
    order, as a BGR/RGB slip would: wrong only at a shape the small cases do not have."""

    def forward(self, layer, inputs, weights):
        if layer.type.name == "conv" and layer.in_shapes[0][2] == 3:
            weights = {**weights, "filters": np.ascontiguousarray(weights["filters"][:, :, ::-1])}
        return super().forward(layer, inputs, weights)


class _Dropped:
    """A residual whose sum at a fan-out keeps only the newest share."""

    def __init__(self, array):
        self.array = array
        self.shape = array.shape

    def __add__(self, other):
        return other


def _unwrap(arrays):
    return [getattr(a, "array", a) for a in arrays]


class FanOutNotSummed(NumpyBackend):
    """Where one map feeds several layers, its residual is the last reader's, not the sum."""

    def backward(self, layer, inputs, outputs, out_residuals, weights):
        results = super().backward(layer, inputs, outputs, _unwrap(out_residuals), weights)
        return [_Dropped(r) for r in results]

    def gradient(self, layer, inputs, out_residuals):
        return super().gradient(layer, inputs, _unwrap(out_residuals))

    def to_host(self, array):
        return super().to_host(getattr(array, "array", array))


class UpdateWrongSign(NumpyBackend):
    """The update subtracts: W -= W_D / B, against Appendix A's plus sign."""

    def update(self, layer, weights, grads, batch):
        for name, grad in grads.items():
            weights[name] -= grad / batch


# Networks: Ш is the cheapest with a fan-out, В the one with FC on a 7x7 map.
@pytest.mark.parametrize(
    ("mutant", "network", "mode"),
    [
        (WrongElement, "Sh", "inference"),
        (MissingBias, "Sh", "inference"),
        (MissingBias, "Sh", "training"),
        (TransposedFC, "V", "inference"),
        (FanOutNotSummed, "Sh", "training"),
        (UpdateWrongSign, "Sh", "training"),
        (FCBiasIgnored, "V", "inference"),
        (FCBiasIgnored, "V", "training"),
        (ConvBiasIgnoredFromRow10, "V", "inference"),
        (ConvBiasIgnoredFromRow10, "R", "training"),
        (ThreeChannelsReversed, "R", "inference"),
    ],
    ids=lambda v: v if isinstance(v, str) else v.__name__,
)
def test_network_mutant_fails_by_ten_times(shipped_networks, mutant, network, mode):
    result = verify_network(mutant("float32"), shipped_networks[network], mode, batch=2, seed=5)
    assert_fails_by_margin(result)


def _case(type_name, tag):
    return next(c for c in layer_cases() if c.layer.type.name == type_name and c.tag == tag)


@pytest.mark.parametrize(
    ("mutant", "type_name", "tag", "step"),
    [
        (WrongElement, "conv", "k3s2p1", "forward"),
        (MissingBias, "conv", "k3s1p1", "forward"),
        (TransposedFC, "fc", "3x2x4-F5", "forward"),
        (MaxPoolMinusInfinity, "maxpool", "k3s2p1-negative", "forward"),
        (AvgPoolInBoundsDivisor, "avgpool", "k3s2p1", "forward"),
        (UpdateWrongSign, "depthwise", "k3s2p1", "update"),
        (FCBiasIgnored, "fc", "3x2x4-F5", "forward"),
    ],
    ids=lambda v: v if isinstance(v, str) else v.__name__,
)
def test_layer_mutant_fails_by_ten_times(mutant, type_name, tag, step):
    case = _case(type_name, tag)
    result = verify_layer(
        mutant("float32"), case.layer, step, 2, seed=5, subject=tag, draw_input=case.draw_input
    )
    assert_fails_by_margin(result)


def test_fan_out_mutant_is_invisible_without_a_fan_out():
    # The mutant changes nothing where no map feeds two layers: the failure above is the
    # fan-out's, not an artefact of the wrapper.
    layer = make_layer("conv", [(5, 5, 3)], F=4, Rx=3, Ry=3, S=1, Px=1, Py=1)
    result = verify_layer(FanOutNotSummed("float32"), layer, "backward", 2, seed=5, subject="c")
    assert result.verdict != NOT_CORRECT


@pytest.mark.parametrize(
    ("mutant", "network", "mode"),
    [
        (FCBiasIgnored, "V", "inference"),
        (ConvBiasIgnoredFromRow10, "V", "inference"),
        (ConvBiasIgnoredFromRow10, "R", "training"),
    ],
    ids=lambda v: v if isinstance(v, str) else v.__name__,
)
def test_bias_mutants_pass_the_networks_under_the_full_range_weight_draw(
    shipped_networks, mutant, network, mode
):
    # Why the scaled draw is the default (docs/standard.md §6): with every weight from
    # U(-1, 1) the maps grow to 1e12 and more, and a U(-1, 1) bias vanishes in their rounding.
    network = shipped_networks[network]
    result = verify_network(mutant("float32"), network, mode, 2, seed=5, weights="full-range")
    assert result.verdict != NOT_CORRECT, result.first_failure


@pytest.mark.parametrize("dtype", ["float32", "float16", "int8"])
def test_relu_writing_into_its_input_fails_naming_the_kernel_and_the_argument(dtype):
    # In each type the backend holds the host's draws in (the check keeps its copy in that
    # type once the draws convert exactly, and compares bytes).
    case = _case("relu", "uniform")
    result = verify_layer(ReluInPlace(dtype), case.layer, "forward", 2, seed=5, subject="r")
    assert result.verdict == NOT_CORRECT
    assert "relu forward wrote into its argument IN1" in result.first_failure
    # Its output alone is right: only the check of its arguments sees the mutant.
    assert all(check.passed for check in result.checks)
    print(f"{result.subject}: {result.first_failure}")


def test_a_backward_reading_a_map_it_is_not_given_fails_its_layer_item_as_in_a_network(
    shipped_networks,
):
    # One contract (docs/backends.md): ReLU's backward is given IN, not OUT, in a layer item
    # as in a network, so a kernel written from OUT fails its layer item, not first a network.
    backend, case = backends.ReluBackwardFromOut("float32"), _case("relu", "uniform")
    forward = verify_layer(backend, case.layer, "forward", 2, seed=5, subject="relu forward")
    backward = verify_layer(backend, case.layer, "backward", 2, seed=5, subject="relu backward")
    network = verify_network(backend, shipped_networks["Sh"], "training", batch=1, seed=5)
    assert not forward.failed
    assert backward.verdict == network.verdict == NOT_CORRECT
    assert "IndexError" in backward.error and "IndexError" in network.error


def _first_failing(mutant, cases, step="forward"):
    """The first of ``cases`` whose ``step`` the mutant fails, with its verification."""
    for case in cases:
        result = verify_layer(
            mutant("float32"),
            case.layer,
            step,
            2,
            seed=5,
            subject=case.tag,
            draw_input=case.draw_input,
        )
        if result.verdict == NOT_CORRECT:
            return case, result
    return None, None


@pytest.mark.parametrize(
    ("mutant", "type_name"),
    [(ThreeChannelsReversed, "conv"), (ConvBiasIgnoredFromRow10, "conv")],
    ids=lambda v: v if isinstance(v, str) else v.__name__,
)
def test_network_shape_layer_items_catch_what_the_small_cases_miss(
    shipped_networks, mutant, type_name
):
    small = [c for c in layer_cases() if c.layer.type.name == type_name]
    assert _first_failing(mutant, small) == (None, None)
    shaped = [c for c in network_cases(shipped_networks) if c.layer.type.name == type_name]
    case, result = _first_failing(mutant, shaped)
    assert case is not None, "no network-shape item caught the mutant"
    assert_fails_by_margin(result)


# Integer inference (docs/standard.md §6): the NumPy backend's int8 kernels with one mistake
# each (tests/gost_test_backends.py); docs/verification.md tabulates their worst ratios.


@pytest.mark.parametrize(
    ("mutant", "dtype"),
    [
        (WrongScaleOnOneRow, "int8"),
        (WrongScaleOnOneRow, "int16"),
        (Int16Accumulator, "int8"),
        (BiasAtOutputScale, "int8"),
        (BiasAtOutputScale, "int16"),
    ],
    ids=lambda v: v if isinstance(v, str) else v.__name__,
)
def test_integer_network_mutant_fails_by_ten_times(shipped_networks, mutant, dtype):
    result = verify_network(mutant(dtype), shipped_networks["Sh"], "inference", 2, seed=5)
    assert_fails_by_margin(result)


@pytest.mark.parametrize(
    ("mutant", "type_name", "tag"),
    [
        (WrongScaleOnOneRow, "fc", "3x2x4-F5"),
        (Int16Accumulator, "conv", "k3s1p1"),
        (Int16Accumulator, "depthwise", "k5s3p2"),
        (BiasAtOutputScale, "conv", "k3s2p1"),
    ],
    ids=lambda v: v if isinstance(v, str) else v.__name__,
)
def test_integer_layer_mutant_fails_by_ten_times(mutant, type_name, tag):
    case = _case(type_name, tag)
    result = verify_layer(
        mutant("int8"), case.layer, "forward", 2, seed=5, subject=tag, draw_input=case.draw_input
    )
    assert_fails_by_margin(result)


def test_rounding_down_fails_the_mean_error_by_ten_times_at_a_network_shape(shipped_networks):
    # Floor's error is at most twice round-to-nearest's RMS, so one requantisation's СКО
    # fails by about 1x (СКОП is twice the model's RMS). Its mean, -s/2 at every value,
    # is what gives it away: by sqrt(3N) / 5 of an item's N values (docs/verification.md).
    small = verify_layer(RoundsDown("int8"), _case("conv", "k3s1p1").layer, "forward", 2, 5, "c")
    [rmse, mean] = small.checks
    assert 0.8 < rmse.ratio < 1.5 and mean.statistic == MEAN_ERROR and mean.ratio > 5
    first = network_cases({"Sh": shipped_networks["Sh"]})[0]
    result = verify_layer(RoundsDown("int8"), first.layer, "forward", 2, seed=5, subject=first.tag)
    assert_fails_by_margin(result)
    assert result.worst.statistic == MEAN_ERROR


@pytest.mark.parametrize("dtype", ["int8", "int16"])
@pytest.mark.parametrize("case", saturating_cases(), ids=lambda c: c.tag)
def test_wrapping_around_fails_every_saturating_item_by_ten_times(case, dtype):
    # A wrapped value costs 2^n quanta. Section 8's own scales leave every reference value
    # inside its range, so only the saturating items (about a tenth of the values past
    # it) show the wrap; the plain item of the same layer passes (docs/verification.md).
    result = verify_layer(
        WrapsAround(dtype), case.layer, "forward", 2, seed=5, subject=case.tag, saturating=True
    )
    assert_fails_by_margin(result)
    plain = verify_layer(WrapsAround(dtype), case.layer, "forward", 2, seed=5, subject=case.tag)
    assert plain.verdict != NOT_CORRECT
