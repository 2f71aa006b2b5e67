"""The arithmetic of section 8: СКО, verdicts, array checks, and the СКОП error model."""

import math

import numpy as np
import pytest

from pytest_gostcnn.backends.numpy import NumpyBackend
from pytest_gostcnn.conformance.error_kernels import ErrorModelKernels
from pytest_gostcnn.conformance.error_model import (
    SAFETY,
    UNCERTAINTY,
    ValueAndVariance,
    admissible_rmse,
)
from pytest_gostcnn.conformance.verification import (
    CORRECT,
    NOT_CORRECT,
    NOT_VERIFIED,
    REFERENCE_GRADE,
    ArrayCheck,
    Verification,
    check_array,
    rmse,
    verdict,
    verify_layer,
    verify_network,
)
from pytest_gostcnn.model.dtypes import PRECISIONS
from pytest_gostcnn.model.layers import make_layer
from pytest_gostcnn.model.table_files import load_network
from pytest_gostcnn.reference import MODULES

F32 = PRECISIONS["float32"]


def exact(value) -> ValueAndVariance:
    value = np.asarray(value, dtype=np.float64)
    return ValueAndVariance(value, np.zeros_like(value), F32.storage)


# СКО and the verdict (standard.md §6) ---------------------------------------------------------


def test_rmse_is_the_root_of_the_mean_squared_difference():
    assert rmse(np.array([1.0, 2.0]), np.array([1.0, 4.0])) == pytest.approx(math.sqrt(2.0))


def test_rmse_is_computed_in_float64_whatever_the_input_dtype():
    # float32 would square 1e20 into inf; the СКО must stay finite.
    got = np.array([1e20], dtype=np.float32)
    assert rmse(got, np.array([0.0])) == pytest.approx(float(got[0]))


def test_every_rmse_zero_is_reference_grade():
    assert verdict([ArrayCheck("a", 0.0, 1.0), ArrayCheck("b", 0.0, 0.0)]) == REFERENCE_GRADE


def test_every_rmse_below_its_threshold_is_correct():
    assert verdict([ArrayCheck("a", 0.0, 1.0), ArrayCheck("b", 0.5, 1.0)]) == CORRECT


def test_rmse_equal_to_its_threshold_is_not_correct():
    # Section 8: "not less than СКОП" means not correct.
    assert verdict([ArrayCheck("a", 1.0, 1.0)]) == NOT_CORRECT


def test_threshold_zero_admits_only_reference_grade():
    assert verdict([ArrayCheck("a", 1e-30, 0.0)]) == NOT_CORRECT
    assert verdict([ArrayCheck("a", 0.0, 0.0)]) == REFERENCE_GRADE


def test_nothing_compared_is_not_correct():
    assert verdict([]) == NOT_CORRECT


def test_a_check_with_a_problem_fails_with_infinite_ratio():
    check = ArrayCheck("a", None, 1.0, "3 of 4 elements are NaN or Inf")
    assert not check.passed
    assert check.ratio == math.inf
    assert verdict([check, ArrayCheck("b", 0.0, 1.0)]) == NOT_CORRECT


# Checking one returned array ------------------------------------------------------------


def reference(shape=(2, 3, 3, 4), seed=0) -> ValueAndVariance:
    value = np.random.default_rng(seed).uniform(-1, 1, size=shape)
    return ValueAndVariance(value, np.full(shape, 1e-12), F32.storage)


def test_nan_in_a_returned_array_is_a_failure_with_that_reason():
    ref = reference()
    got = ref.value.astype(np.float32)
    got[0, 0, 0, 0] = np.nan
    check = check_array("OUT", got, ref, "float32")
    assert not check.passed and "NaN" in check.problem


def test_inf_in_a_returned_array_is_a_failure():
    ref = reference()
    got = ref.value.astype(np.float32)
    got[1, 2, 2, 3] = np.inf
    assert "1 of 72 elements are NaN or Inf" in check_array("OUT", got, ref, "float32").problem


def test_a_returned_array_of_the_wrong_shape_fails():
    ref = reference()
    got = ref.value.astype(np.float32).reshape(2, 9, 4)
    assert (
        "shape (2, 9, 4), expected (2, 3, 3, 4)" in check_array("OUT", got, ref, "float32").problem
    )


def test_a_float32_backend_returning_float64_fails_on_dtype():
    ref = reference()
    assert (
        "dtype float64, expected float32" in check_array("OUT", ref.value, ref, "float32").problem
    )


def test_a_returned_object_that_is_not_an_array_fails():
    ref = reference()
    assert "not a NumPy array" in check_array("OUT", ref.value.tolist(), ref, "float32").problem


def test_an_almost_all_zero_reference_is_untrustworthy():
    value = np.zeros((1000,))
    value[:5] = 1.0
    ref = ValueAndVariance(value, np.zeros_like(value), F32.storage)
    check = check_array("IN_D", value.astype(np.float32), ref, "float32")
    assert not check.passed and "untrustworthy" in check.problem and "99.5% zeros" in check.problem
    # Alone it leaves the item not verified; beside a real failure, the item is not correct.
    assert verdict([check]) == NOT_VERIFIED
    wrong = check_array(
        "OUT",
        value.astype(np.float32) + 1,
        ValueAndVariance(value + 2, value * 0, F32.storage),
        "float32",
    )
    assert verdict([check, wrong]) == NOT_CORRECT


def test_a_constant_reference_is_untrustworthy():
    value = np.full((10,), 3.0)
    ref = ValueAndVariance(value, np.zeros_like(value), F32.storage)
    assert "constant" in check_array("x", value.astype(np.float32), ref, "float32").problem


def test_threshold_override_is_a_share_of_the_reference_rms():
    ref = ValueAndVariance(np.array([3.0, -4.0]), np.zeros(2), F32.storage)
    check = check_array("x", np.array([3.0, -4.0], np.float32), ref, "float32", threshold=0.1)
    assert check.admissible == pytest.approx(0.1 * math.sqrt(12.5))


def test_a_type_no_model_covers_is_refused():
    # docs/standard.md §6: a type no model gives a СКОП is refused, not accepted and failed.
    ref = reference()
    with pytest.raises(ValueError, match="no error model derives СКОП for int4"):
        check_array("x", ref.value, ref, "int4")


def test_an_integer_array_is_compared_at_its_scale():
    # docs/backends.md, "Integer types": the host array holds integers, compared as q * s.
    ref = ValueAndVariance(np.array([3.0, -4.0]), np.full(2, 0.25), 0.0)
    exact = check_array("x", np.array([6, -8], np.int8), ref, "int8", scale=0.5)
    assert exact.rmse == 0 and exact.passed
    off = check_array("x", np.array([7, -8], np.int8), ref, "int8", scale=0.5)
    assert off.rmse == pytest.approx(math.sqrt(0.125))


@pytest.mark.parametrize(("dtype", "wrong"), [("int8", np.int16), ("int16", np.float32)])
def test_an_integer_array_of_another_dtype_fails(dtype, wrong):
    ref = ValueAndVariance(np.array([3.0, -4.0]), np.full(2, 0.25), 0.0)
    check = check_array("x", np.array([6, -8], wrong), ref, dtype, scale=0.5)
    assert not check.passed and f"expected {dtype}" in check.problem


# The error model behind СКОП --------------------------------------------------------------


def test_admissible_rmse_is_safety_times_the_rms_of_the_modelled_error():
    bounded = ValueAndVariance(np.zeros(4), np.array([1.0, 4.0, 9.0, 16.0]), F32.storage)
    assert admissible_rmse(bounded) == pytest.approx(SAFETY * math.sqrt(7.5))


def test_rounding_to_bfloat16_is_to_nearest_even():
    to_bf16 = PRECISIONS["bfloat16"].round
    # bfloat16 has 7 stored mantissa bits: 1 + 2^-8 ties between 1 and 1 + 2^-7.
    assert to_bf16(np.array([1 + 2**-8]))[0] == 1.0
    assert to_bf16(np.array([1 + 3 * 2**-8]))[0] == 1 + 2**-6
    assert to_bf16(np.array([1 + 2**-8 + 2**-12]))[0] == 1 + 2**-7


def test_a_value_the_type_holds_exactly_carries_no_error():
    model = ErrorModelKernels(F32)
    bounded = model.bound(np.array([0.5, 1 / 3]))
    assert bounded.var[0] == 0.0
    assert bounded.var[1] == pytest.approx((np.float32(1 / 3) - 1 / 3) ** 2)


def test_fan_out_sum_adds_both_errors_and_its_own_rounding():
    a = ValueAndVariance(np.array([1.0]), np.array([2.0]), F32.storage)
    b = ValueAndVariance(np.array([3.0]), np.array([5.0]), F32.storage)
    total = a + b
    assert total.value[0] == 4.0
    assert total.var[0] == pytest.approx(7.0 + (F32.storage * 4.0) ** 2)


def test_modelled_conv_error_bounds_the_float32_error_without_being_vacuous():
    # A 3x3x64 convolution: float32's RMSE must lie below the model's RMS, and above a
    # hundredth of it (a threshold 100x too loose would let real mistakes through).
    rng = np.random.default_rng(1)
    layer = make_layer("conv", [(12, 12, 64)], F=32, Rx=3, Ry=3, S=1, Px=1, Py=1)
    model = ErrorModelKernels(F32)
    x = F32.round(rng.uniform(-127, 128, size=(4, 12, 12, 64)))
    w = {
        "filters": F32.round(rng.uniform(-1, 1, size=layer.weight_shapes["filters"])),
        "biases": F32.round(rng.uniform(-1, 1, size=(32,))),
    }
    bounded = model.forward(layer, [model.bound(x)], {k: model.bound(v) for k, v in w.items()})[0]
    got = MODULES["conv"].forward(
        layer, [x.astype(np.float32)], {k: v.astype(np.float32) for k, v in w.items()}
    )[0]
    modelled = math.sqrt(float(np.mean(bounded.var)))
    assert modelled / 100 < rmse(got, bounded.value) < modelled


def test_relu_near_zero_may_flip_and_its_whole_residual_counts_as_error():
    layer = make_layer("relu", [(1, 1, 2)])
    model = ErrorModelKernels(F32)
    sd = 1e-3
    x = ValueAndVariance(
        np.array([[[[0.5 * sd, 10.0]]]]), np.full((1, 1, 1, 2), sd**2), F32.storage
    )
    r = exact([[[[7.0, 7.0]]]])
    (in_residual,) = model.backward(layer, [x], [], [r], {})
    assert in_residual.var[0, 0, 0, 0] == pytest.approx(49.0)  # within UNCERTAINTY sd of 0
    assert in_residual.var[0, 0, 0, 1] == 0.0  # far from 0: the decision is certain
    assert UNCERTAINTY * sd > 0.5 * sd


def test_max_pooling_with_a_near_tie_may_route_the_residual_either_way():
    layer = make_layer("maxpool", [(1, 2, 1)], Rx=1, Ry=2, S=1, Px=0, Py=0)
    model = ErrorModelKernels(F32)
    x = ValueAndVariance(
        np.array([5.0, 5.0 + 1e-9]).reshape(1, 1, 2, 1), np.full((1, 1, 2, 1), 1e-12), 0
    )
    (out,) = model.forward(layer, [x], {})
    (in_residual,) = model.backward(layer, [x], [out], [exact(np.full((1, 1, 1, 1), 3.0))], {})
    assert np.all(in_residual.var >= 9.0)


def test_max_pooling_with_a_clear_maximum_routes_with_certainty():
    layer = make_layer("maxpool", [(1, 2, 1)], Rx=1, Ry=2, S=1, Px=0, Py=0)
    model = ErrorModelKernels(F32)
    x = ValueAndVariance(np.array([5.0, 9.0]).reshape(1, 1, 2, 1), np.full((1, 1, 2, 1), 1e-12), 0)
    (out,) = model.forward(layer, [x], {})
    (in_residual,) = model.backward(layer, [x], [out], [exact(np.full((1, 1, 1, 1), 3.0))], {})
    assert np.all(in_residual.var < 1e-6)


def test_bias_gradient_of_a_broadcast_residual_adds_its_errors_coherently():
    # Global average pooling hands one residual error to every position; a bias gradient
    # sums them all, so its error grows like n, not sqrt(n).
    n = 100
    layer = make_layer("conv", [(10, 10, 1)], F=1, Rx=1, Ry=1, S=1, Px=0, Py=0)
    model = ErrorModelKernels(F32)
    x = exact(np.ones((1, 10, 10, 1)))
    r = ValueAndVariance(np.ones((1, 10, 10, 1)), np.full((1, 10, 10, 1), 1e-6), F32.storage)
    grads = model.gradient(layer, [x], [r])
    assert grads["biases"].var[0] >= n**2 * 1e-6


@pytest.mark.parametrize("carried", [False, True])
def test_average_pooling_bounds_an_error_every_position_shares_only_where_weights_carry_one(
    carried,
):
    # One error of sd 1e-3 at all 49 positions (what a weight's carried error gives): the
    # mean keeps it whole. Independent errors would average down to sd 1e-3 / 7, the
    # model's reading where the weights carry only their rounding.
    layer = make_layer("avgpool", [(7, 7, 1)], Rx=7, Ry=7, S=1, Px=0, Py=0)
    model = ErrorModelKernels(F32, carried=carried)
    x = ValueAndVariance(np.ones((1, 7, 7, 1)), np.full((1, 7, 7, 1), 1e-6), F32.storage)

    (out,) = model.forward(layer, [x], {})

    shared_error = 1e-3  # the mean of 49 equal errors
    assert (admissible_rmse(out) >= shared_error) == carried
    assert out.var[0, 0, 0, 0] >= (1e-6 if carried else 1e-6 / 49)


def test_a_padded_windows_shared_error_is_its_in_bounds_share_of_the_divisor():
    # A corner of a 3x3 window padded by 1 reads 4 positions and divides by 9: a shared
    # error of sd 1e-3 at each is 4/9 of it in the mean, its variance (4/9)^2 of theirs,
    # where independent errors would leave 4/81.
    layer = make_layer("avgpool", [(3, 3, 1)], Rx=3, Ry=3, S=1, Px=1, Py=1)
    x = ValueAndVariance(np.ones((1, 3, 3, 1)), np.full((1, 3, 3, 1), 1e-6), F32.storage)

    shared, independent = (
        ErrorModelKernels(F32, carried=carried).forward(layer, [x], {})[0].var[0, 0, 0, 0]
        for carried in (True, False)
    )

    assert shared == pytest.approx((4 / 9) ** 2 * 1e-6, rel=1e-6)
    assert independent == pytest.approx(4 / 81 * 1e-6, rel=1e-6)


# Whose failure: the backend's, or the suite's own -------------------------------------------


class _RaisesInForward(NumpyBackend):
    def forward(self, layer, inputs, weights):
        raise RuntimeError("kernel missing")


@pytest.mark.parametrize("where", ["draw", "reference"])
def test_a_failure_on_the_suites_side_is_not_verified_not_the_backends(monkeypatch, where):
    # The backend here would fail too: the suite's side runs first and is the one reported.
    def no_memory(*args, **kwargs):
        raise MemoryError("Unable to allocate 145. TiB")

    if where == "draw":
        monkeypatch.setattr("pytest_gostcnn.conformance.network.draw_input", no_memory)
    else:
        monkeypatch.setattr(ErrorModelKernels, "forward", no_memory)
    network = load_network("Sh")

    result = verify_network(_RaisesInForward("float32"), network, "inference", batch=1, seed=0)

    assert result.verdict == NOT_VERIFIED and result.failed
    assert result.error == (
        "the suite failed drawing the data or computing the float64 reference at batch 1, "
        "before the backend ran: MemoryError: Unable to allocate 145. TiB"
    )


def test_a_layer_steps_reference_failing_is_not_verified_not_the_backends(monkeypatch):
    def no_memory(*args, **kwargs):
        raise MemoryError("out")

    monkeypatch.setattr(ErrorModelKernels, "gradient", no_memory)
    layer = make_layer("conv", [(5, 5, 2)], F=3, Rx=3, Ry=3, S=1, Px=1, Py=1)

    result = verify_layer(_RaisesInForward("float32"), layer, "update", 2, seed=1, subject="c")

    assert result.verdict == NOT_VERIFIED
    assert result.error.endswith("before the backend ran: MemoryError: out")


@pytest.mark.parametrize("step", ["forward", "update"])
def test_a_layer_step_failure_is_the_backends_and_the_reference_runs_every_step_before(step):
    layer = make_layer("conv", [(5, 5, 2)], F=3, Rx=3, Ry=3, S=1, Px=1, Py=1)

    failed = verify_layer(_RaisesInForward("float32"), layer, step, 2, seed=1, subject="c")
    passed = verify_layer(NumpyBackend("float32"), layer, step, 2, seed=1, subject="c")

    assert failed.error.startswith("the backend raised RuntimeError: kernel missing (at ")
    assert failed.verdict == NOT_CORRECT
    assert passed.error is None and not passed.failed


def test_the_failure_shown_is_the_backends_worst_not_a_degenerate_reference():
    zeros = ArrayCheck("IN_D", None, 1.0, "the reference is all zeros", reference_problem=True)
    near, far = ArrayCheck("OUT", 1.1, 1.0), ArrayCheck("OUT mean", 9.5, 1.0)
    result = Verification("s", checks=[zeros, near, far])
    assert result.verdict == NOT_CORRECT
    assert result.first_failure.startswith("OUT mean:")  # 9.5x, not the 1.1x listed first
    assert Verification("s", checks=[zeros]).first_failure.startswith("IN_D:")


def test_an_error_where_the_bound_is_0_is_described_without_an_infinite_ratio():
    assert ArrayCheck("OUT", 1e-30, 0.0).describe() == (
        "OUT: СКО 1.000e-30 vs СКОП 0.000e+00 (any error misses 0)"
    )


def test_a_networks_failure_names_the_lowest_rows_failed_array_and_the_worst_beside_it():
    # A convolution wrong from row 1 fails every row after it; the worst is far downstream.
    checks = [
        ArrayCheck("output", 30.0, 1.0),
        ArrayCheck("row 1 filters gradient", 2.0, 1.0),
        ArrayCheck("row 1 filters updated", 0.5, 1.0),
        ArrayCheck("row 54 filters gradient", 900.0, 1.0),
    ]
    said = Verification("Sh-training", checks=checks).first_failure
    assert said == (
        "row 1 filters gradient: СКО 2.000e+00 vs СКОП 1.000e+00 (2x), the first in row order; "
        "the worst: row 54 filters gradient: СКО 9.000e+02 vs СКОП 1.000e+00 (900x)"
    )
    only = Verification("Sh-training", checks=[checks[1], ArrayCheck("output", 1.5, 1.0)])
    assert only.first_failure.startswith("row 1 filters gradient:")  # the worst and the first


class _ReturnsNone(NumpyBackend):
    """A backend whose ``step`` kernel returns None instead of its arrays."""

    def __init__(self, step: str) -> None:
        super().__init__("float32")
        self.broken = step

    def forward(self, layer, inputs, weights):
        return None if self.broken == "forward" else super().forward(layer, inputs, weights)

    def backward(self, layer, inputs, outputs, out_residuals, weights):
        if self.broken == "backward":
            return None
        return super().backward(layer, inputs, outputs, out_residuals, weights)

    def gradient(self, layer, inputs, out_residuals):
        if self.broken == "gradient":
            return None
        return super().gradient(layer, inputs, out_residuals)


@pytest.mark.parametrize("step", ["forward", "backward", "gradient"])
def test_a_kernel_returning_none_is_named_with_what_it_returned_not_as_the_suites_error(step):
    layer = make_layer("conv", [(5, 5, 2)], F=3, Rx=3, Ry=3, S=1, Px=1, Py=1)

    failed = verify_layer(_ReturnsNone(step), layer, step, 2, seed=1, subject="c")

    assert failed.verdict == NOT_CORRECT
    assert failed.error.startswith("the backend returned what the contract does not allow: ")
    assert f"_ReturnsNone.{step} of row {layer.number} (conv): expected " in failed.error
    assert "got a NoneType with no shape" in failed.error
