"""Integer inference under the fixed-point model (docs/standard.md §6, docs/backends.md
"Integer types"): the scales, the reference's СКОП, and the NumPy backend that runs it."""

import numpy as np
import pytest
from gost_test_backends import RoundsDown, WrapsAround

from pytest_gostcnn.backends.numpy import NumpyBackend
from pytest_gostcnn.backends.numpy.integer import gemm_dtype
from pytest_gostcnn.conformance import fixed_point
from pytest_gostcnn.conformance.layer_cases import layer_cases, saturating_cases
from pytest_gostcnn.conformance.timed_check import verify_round
from pytest_gostcnn.conformance.verdicts import NOT_VERIFIED, PASSED_VERDICTS, REFERENCE_GRADE
from pytest_gostcnn.conformance.verification import (
    MEAN_ERROR,
    MEAN_ERROR_SIGMAS,
    mean_error_check,
    verify_layer,
    verify_network,
)
from pytest_gostcnn.model.data import draw_weights
from pytest_gostcnn.model.fixed_point import (
    INTEGER_TYPES,
    REACH,
    LayerScales,
    output_scales,
    quantise,
    quantise_bias,
    requantises,
    scale_of,
)
from pytest_gostcnn.model.layers import make_layer

INT8, INT16 = INTEGER_TYPES["int8"], INTEGER_TYPES["int16"]


def test_a_scale_maps_the_largest_magnitude_just_inside_the_range():
    # 2.5498 maps to 127.49: it rounds to 127, and a value 0.01 quantum larger to 128.
    values = np.array([0.5, -2.5498, 1.0])
    scale = scale_of(values, INT8)
    assert scale == pytest.approx(2.5498 / (127 + REACH))
    assert quantise(values, scale, INT8).tolist() == [25, -127, 50]
    assert np.rint(2.5498 / scale + 0.011) == 128
    assert scale_of(np.zeros(3), INT16) == 1.0  # any scale holds zeros


def test_quantising_rounds_ties_to_even_and_saturates():
    q = quantise(np.array([0.5, 1.5, -2.5, 300.0, -300.0]), 1.0, INT8)
    assert q.dtype == np.int8 and q.tolist() == [0, 2, -2, 127, -128]


def test_a_bias_beyond_the_accumulator_is_a_clear_error():
    assert quantise_bias(np.array([1.0]), 1e-3, INT8, row=4).dtype == np.int32
    with pytest.raises(ValueError, match="row 4: a bias .* beyond the int32 accumulator"):
        quantise_bias(np.array([1.0]), 1e-10, INT8, row=4)


def test_output_scales_follow_each_layer_types_rule():
    shape = [(4, 4, 2)]
    out = [np.array([[-3.0, 6.3745]])]
    conv = make_layer("conv", shape, F=2, Rx=1, Ry=1, S=1, Px=0, Py=0)
    assert output_scales(conv, (0.1,), out, INT8) == (pytest.approx(0.05),)
    assert output_scales(conv, (0.1,), out, INT8, margin=2.0) == (pytest.approx(0.1),)
    relu = make_layer("relu", shape)
    assert output_scales(relu, (0.1,), out, INT8) == (0.1,)
    concat = make_layer("concat", [(4, 4, 2), (4, 4, 3)])
    assert output_scales(concat, (0.1, 0.3), out, INT8) == (0.3,)
    assert requantises(concat, LayerScales((0.1, 0.3), (0.3,), {})) == [True, False]
    assert requantises(relu, LayerScales((0.1,), (0.1,), {})) == [False]
    assert requantises(conv, LayerScales((0.1,), (0.05,), {})) == [True]


def _layer(type_name, tag):
    return next(c for c in layer_cases() if c.layer.type.name == type_name and c.tag == tag)


@pytest.mark.parametrize(("type_name", "tag"), [("conv", "k3s1p1"), ("avgpool", "k3s2p1")])
def test_one_requantisation_of_exact_inputs_gives_s_over_root_twelve(type_name, tag):
    # Drawn inputs are on their grid: the only error is the output's rounding, s^2/12.
    case = _layer(type_name, tag)
    data = fixed_point.prepare_layer(case.layer, 2, 5, INT8, case.draw_input)
    scale = data.scales[case.layer.number].outputs[0]
    assert np.allclose(data.reference[0].var, scale * scale / 12)


def test_a_layer_that_does_not_round_has_skop_zero_and_one_that_does_has_more():
    relu = fixed_point.prepare_layer(_layer("relu", "uniform").layer, 2, 5, INT8)
    assert not relu.reference[0].var.any()
    eltwise = fixed_point.prepare_layer(_layer("eltwise", "5x4x3").layer, 2, 5, INT8)
    assert eltwise.reference[0].var.min() > 0


def test_requantisation_errors_are_carried_through_later_layers():
    # conv -> conv: the second's variance holds the first's s1^2/12 through its weights.
    net_first = make_layer("conv", [(6, 6, 3)], number=1, F=4, Rx=3, Ry=3, S=1, Px=1, Py=1)
    second = make_layer("conv", [(6, 6, 4)], number=2, F=4, Rx=1, Ry=1, S=1, Px=0, Py=0)
    rng = np.random.default_rng(1)
    model = fixed_point.FixedPointKernels(INT8)

    def weights(layer):
        drawn = {}
        for name, shape in layer.weight_shapes.items():
            values = rng.uniform(-1, 1, size=shape)
            if name == "biases":
                drawn[name] = fixed_point.ValueAndVariance(values, np.zeros(shape), 0.0)
            else:
                drawn[name] = fixed_point.quantised(values, INT8)[1]
        return drawn

    image = fixed_point.quantised(rng.uniform(-127, 128, size=(1, 6, 6, 3)), INT8)[1]
    first_out = model.forward(net_first, [image], weights(net_first))[0]
    w2 = weights(second)
    out = model.forward(second, [first_out], w2)[0]
    s1, s2 = model.table[1].outputs[0], model.table[2].outputs[0]
    carried = (s1 * s1 / 12) * np.sum(w2["filters"].value ** 2, axis=(0, 1, 2))
    assert np.allclose(out.var, carried + s2 * s2 / 12)


def test_float32_gemm_while_exact_else_float64_else_refused():
    small = make_layer("conv", [(4, 4, 8)], F=2, Rx=3, Ry=3, S=1, Px=1, Py=1)  # 72 * 2^14
    assert gemm_dtype(small, INT8, np.array([5])) is np.float32
    assert gemm_dtype(small, INT16, np.array([5])) is np.float64
    assert gemm_dtype(small, INT8, np.array([2**24])) is np.float64
    wide = make_layer("fc", [(1, 1, 2**23)], F=1)
    with pytest.raises(ValueError, match="not exact in float64"):
        gemm_dtype(wide, INT16, np.array([0]))


@pytest.mark.parametrize("dtype", ["int8", "int16"])
def test_numpy_backend_verifies_every_small_layer_case(dtype):
    for case in layer_cases():
        result = verify_layer(
            NumpyBackend(dtype), case.layer, "forward", 2, 5, case.tag, draw_input=case.draw_input
        )
        assert result.verdict in PASSED_VERDICTS, (case.tag, result.first_failure)
        if case.layer.type.name in ("relu", "maxpool", "split", "shuffle"):
            assert result.verdict == REFERENCE_GRADE  # on the grid: exact
        assert set(result.as_dict()["scales"]) == {str(case.layer.number)}


@pytest.mark.parametrize("dtype", ["int8", "int16"])
@pytest.mark.parametrize("case", saturating_cases(), ids=lambda c: c.tag)
def test_numpy_backend_saturates_where_a_scale_leaves_values_past_the_range(case, dtype):
    data = fixed_point.prepare_layer(case.layer, 2, 5, INTEGER_TYPES[dtype], saturating=True)
    [out] = data.reference
    itype = INTEGER_TYPES[dtype]
    clamped = (out.value == itype.largest * out.scale) | (out.value == itype.smallest * out.scale)
    assert 0.05 < np.mean(clamped) < 0.15  # about SATURATED_SHARE of the values
    assert np.all(out.var[clamped] == 0) and np.all(out.var[~clamped] > 0)
    result = verify_layer(
        NumpyBackend(dtype), case.layer, "forward", 2, 5, case.tag, saturating=True
    )
    assert result.verdict in PASSED_VERDICTS, result.first_failure
    assert [c.statistic for c in result.checks] == ["СКО", MEAN_ERROR]


def test_a_failure_says_what_the_integer_checks_mean():
    # The failed check that misses by most leads, with what it means: the mean error of a
    # floor (its СКО fails by about 1x only), the wrap of a saturating item.
    case = next(c for c in layer_cases() if c.tag == "k3s1p1" and c.layer.type.name == "conv")
    floor = verify_layer(RoundsDown("int8"), case.layer, "forward", 2, 5, case.tag)
    assert floor.first_failure.startswith("OUT mean: mean error")
    assert floor.first_failure.endswith(
        "the values lie below the reference on average: the model rounds to nearest"
    )
    saturating = saturating_cases()[0]
    wrap = verify_layer(
        WrapsAround("int8"), saturating.layer, "forward", 2, 5, "s", saturating=True
    )
    assert wrap.first_failure.startswith("OUT: СКО") and "must saturate" in wrap.first_failure


def test_a_saturating_item_is_an_integer_types_only():
    case = saturating_cases()[0]
    result = verify_layer(
        NumpyBackend("float32"), case.layer, "forward", 2, 5, case.tag, saturating=True
    )
    assert result.verdict == NOT_VERIFIED and "integer type's" in result.error


def test_the_mean_error_bound_follows_the_model_and_catches_a_lean_of_half_a_quantum():
    n, scale = 1200, 0.5
    rng = np.random.default_rng(5)
    exact = rng.uniform(-60, 60, n)
    reference = fixed_point.Scaled(exact, np.full(n, scale * scale / 12), scale)
    bound = MEAN_ERROR_SIGMAS * np.sqrt(n * scale * scale / 12) / n
    nearest = mean_error_check("OUT", np.rint(exact / scale), reference, scale)
    assert nearest.admissible == pytest.approx(bound) and nearest.passed
    floor = mean_error_check("OUT", np.floor(exact / scale), reference, scale)
    assert not floor.passed and floor.ratio == pytest.approx(np.sqrt(3 * n) / 5, rel=0.1)
    assert "mean error" in floor.describe() and floor.as_dict()["statistic"] == MEAN_ERROR
    exact_only = fixed_point.Scaled(exact, np.zeros(n), scale)  # nothing rounds: СКОП 0 rules
    assert mean_error_check("OUT", np.rint(exact / scale), exact_only, scale) is None


@pytest.mark.parametrize("dtype", ["int8", "int16"])
def test_numpy_backend_verifies_sh_and_the_report_keeps_every_rows_scales(shipped_networks, dtype):
    network = shipped_networks["Sh"]
    result = verify_network(NumpyBackend(dtype), network, "inference", batch=1, seed=5)
    assert result.verdict in PASSED_VERDICTS, result.first_failure
    assert 0 < result.worst.ratio < 1
    scales = result.as_dict()["scales"]
    assert set(scales) == {str(layer.number) for layer in network.layers}
    assert all(s > 0 for row in scales.values() for s in row["outputs"])


def test_integer_training_is_refused_with_a_clear_message(shipped_networks):
    with pytest.raises(ValueError, match="int8 verifies inference only"):
        verify_network(NumpyBackend("int8"), shipped_networks["Sh"], "training", 1, 5)
    with pytest.raises(ValueError, match="inference only"):
        fixed_point.FixedPointKernels(INT8).backward()


def test_the_numpy_backend_takes_integers_only(shipped_networks):
    with pytest.raises(TypeError, match="expected the integers"):
        NumpyBackend("int8").to_device(np.zeros(3))


def test_a_round_is_checked_under_its_calibration_and_no_verdict_beyond_it(shipped_networks):
    network = shipped_networks["Sh"]
    rng = np.random.default_rng(3)
    drawn = draw_weights(network, rng)
    images = rng.uniform(-127, 128, size=(1, *network.input_shape))
    calibrated = fixed_point.calibrate(network, drawn, images, INT8)
    weights, scales = calibrated.weights, calibrated.scales
    backend = NumpyBackend("int8")
    backend.use_scales(scales)
    loaded = backend.load_weights(network, weights)
    other = rng.uniform(-127, 128, size=images.shape)  # another image of the same draw
    q, _ = fixed_point.fixed_reference(network, weights, other, scales, INT8)
    output = backend.infer(network, loaded, backend.to_device(q))
    with pytest.raises(ValueError, match="needs its calibrated scales"):
        verify_round(backend, network, weights, other, output)
    check = verify_round(backend, network, weights, other, output, scales=scales)
    assert check.verdict in PASSED_VERDICTS, check.first_failure
    # Far beyond the calibration's range the reference leaves it: no verdict, not a failure.
    big = dict(weights)
    big[1] = {**weights[1], "biases": weights[1]["biases"] * 0 + 2**30}
    check = verify_round(backend, network, big, other, output, scales=scales)
    assert check.verdict == NOT_VERIFIED and "calibrated scale holds" in check.error
