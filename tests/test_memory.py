"""The suite's float64 reference a slice of the batch at a time (``model/memory.py``,
``conformance/sliced.py``): results within float64 rounding of the whole batch's, the same
verdicts, and a peak memory within the bound."""

import tracemalloc

import numpy as np
import pytest
from test_executor import ALL_TYPES, FAN_OUT, table

from pytest_gostcnn.backends.numpy import NumpyBackend
from pytest_gostcnn.conformance import harness
from pytest_gostcnn.conformance.error_kernels import ErrorModelKernels
from pytest_gostcnn.conformance.error_model import ValueAndVariance
from pytest_gostcnn.conformance.harness import check_array
from pytest_gostcnn.conformance.sliced import reference_training
from pytest_gostcnn.conformance.verification import NOT_CORRECT, verify_network
from pytest_gostcnn.model import memory
from pytest_gostcnn.model.data import draw_input, draw_out_residual, draw_slices, draw_weights
from pytest_gostcnn.model.dtypes import PRECISIONS
from pytest_gostcnn.model.memory import (
    MemoryBoundError,
    batch_slices,
    footprint,
    parse_size,
    results_held,
    size_text,
)
from pytest_gostcnn.reference.library import ReferenceLibrary
from pytest_gostcnn.run.option_definitions import BY_NAME

BATCH = 5


def training_slices(network, batch, memory):
    return batch_slices(network, batch, memory, error_model=True)


def smallest_bound(network, batch, held=0):
    """The least memory in which the reference runs at ``batch``, ``held`` bytes beside."""
    with pytest.raises(MemoryBoundError) as raised:
        batch_slices(network, batch, 1, error_model=True, held=held)
    return parse_size(str(raised.value).split("the smallest that works is ")[1].split()[0])


def reference_run(network, memory, batch=BATCH, seed=3):
    """The reference with its error model on section 8's draws, within ``memory`` bytes."""
    model = ErrorModelKernels(PRECISIONS["float32"], library=ReferenceLibrary(memory=memory))
    rng = np.random.default_rng(seed)
    weights = {
        n: {k: model.bound(a) for k, a in ws.items()}
        for n, ws in draw_weights(network, rng).items()
    }
    image, residual = draw_input(network, batch, rng), draw_out_residual(network, batch, rng)
    return reference_training(network, model, weights, image, residual), weights


@pytest.mark.parametrize("network", [FAN_OUT, ALL_TYPES], ids=["fan-out", "all types"])
def test_slices_change_the_reference_and_its_error_model_at_float64_rounding(network):
    whole, whole_weights = reference_run(network, 10**9)
    smallest = smallest_bound(network, BATCH)
    assert len(training_slices(network, BATCH, smallest)) == BATCH  # an image a slice
    sliced, sliced_weights = reference_run(network, smallest)
    pairs = [(whole.output, sliced.output), (whole.input_residual, sliced.input_residual)]
    # Forward and backward are each image's own (a product of fewer rows may round
    # otherwise); a gradient and its variance are summed slice by slice.
    for a, b in pairs:
        np.testing.assert_allclose(b.value, a.value, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(b.var, a.var, rtol=1e-10)
    for n, grads in whole.gradients.items():
        for name, grad in grads.items():
            got = sliced.gradients[n][name]
            np.testing.assert_allclose(got.value, grad.value, rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(got.var, grad.var, rtol=1e-10)
            np.testing.assert_allclose(
                sliced_weights[n][name].value, whole_weights[n][name].value, rtol=1e-12
            )
            assert not np.array_equal(got.var, 0 * got.var)


def test_one_slice_is_the_whole_batch_bit_for_bit():
    whole, _ = reference_run(ALL_TYPES, 10**9)
    again, _ = reference_run(ALL_TYPES, 10**9)
    assert len(training_slices(ALL_TYPES, BATCH, 10**9)) == 1
    for n, grads in whole.gradients.items():
        for name, grad in grads.items():
            assert np.array_equal(grad.var, again.gradients[n][name].var)


# Maps large beside Python's own small objects, which tracemalloc counts too.
MAPS = table(
    "maps",
    "{X: 24, Y: 24, L: 4}",
    """\
  - {n: 1, type: conv, F: 8, Rx: 3, Ry: 3, S: 1, Px: 1, Py: 1}
  - {n: 2, type: relu, in1: 1}
  - {n: 3, type: maxpool, in1: 2, Rx: 2, Ry: 2, S: 2, Px: 0, Py: 0}
  - {n: 4, type: depthwise, in1: 3, Rx: 3, Ry: 3, S: 1, Px: 1, Py: 1}
  - {n: 5, type: eltwise, in1: 4, in2: 3}
  - {n: 6, type: fc, in1: 5, F: 10}
""",
)


def test_the_peak_memory_stays_within_the_bound_where_the_whole_batch_would_not():
    batch = 12
    cost = footprint(MAPS, error_model=True)
    kept_whole = 16 * (24 * 24 * 4 + 10)  # an image's output and input residual, held whole
    bound = cost.sliced + 3 * cost.per_image  # three images a slice

    def peak(memory):
        model = ErrorModelKernels(PRECISIONS["float32"], library=ReferenceLibrary(memory=memory))
        rng = np.random.default_rng(0)
        weights = {
            n: {k: model.bound(a) for k, a in ws.items()}
            for n, ws in draw_weights(MAPS, rng).items()
        }
        image, residual = draw_input(MAPS, batch, rng), draw_out_residual(MAPS, batch, rng)
        tracemalloc.start()
        try:
            reference_training(MAPS, model, weights, image, residual)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    assert len(training_slices(MAPS, batch, bound)) == batch // 3
    # The results kept whole are the caller's, beside the bound (conformance/sliced.py).
    assert peak(bound) <= bound + batch * kept_whole
    assert peak(10**9) > bound + batch * kept_whole  # more than the whole batch may keep


class GradientOfHalfTheBatch(NumpyBackend):
    """Each weight gradient summed over the first half of the batch only: a slice lost."""

    def gradient(self, layer, inputs, out_residuals):
        half = -(-inputs[0].shape[0] // 2) if inputs else -(-out_residuals[0].shape[0] // 2)
        return super().gradient(
            layer, [x[:half] for x in inputs], [r[:half] for r in out_residuals]
        )


@pytest.mark.parametrize("backend", [NumpyBackend, GradientOfHalfTheBatch])
def test_the_verdict_is_the_same_whole_or_sliced(backend):
    verdicts = []
    held = results_held(FAN_OUT, 4, training=True)
    for bound in (10**9, smallest_bound(FAN_OUT, 4, held)):
        library = ReferenceLibrary(memory=bound)
        result = verify_network(backend("float32"), FAN_OUT, "training", 4, 7, library=library)
        verdicts.append((result.verdict, [round(c.ratio, 6) for c in result.checks]))
    assert verdicts[0] == verdicts[1]
    assert (verdicts[0][0] == NOT_CORRECT) == (backend is GradientOfHalfTheBatch)


def test_a_bound_too_small_for_one_image_names_the_smallest_that_works():
    smallest = smallest_bound(ALL_TYPES, BATCH)
    with pytest.raises(MemoryBoundError, match=r"of 1KB is too small for one image of .* B=5"):
        batch_slices(ALL_TYPES, BATCH, 1000, error_model=True)
    assert len(training_slices(ALL_TYPES, BATCH, smallest)) == BATCH
    with pytest.raises(MemoryBoundError, match=f"the smallest that works is {size_text(smallest)}"):
        training_slices(ALL_TYPES, BATCH, smallest - 10**4)


def test_the_default_bound_runs_an_image_a_slice_where_one_needs_more(
    shipped_networks, monkeypatch
):
    vgg_like = shipped_networks["V"]
    needs = smallest_bound(vgg_like, 64)
    with pytest.raises(MemoryBoundError):
        training_slices(vgg_like, 64, needs // 2)
    assert len(training_slices(vgg_like, 64, None)) < 64  # 2GB: several images a slice
    monkeypatch.setattr(memory, "DEFAULT_BOUND", needs // 2)
    assert len(training_slices(vgg_like, 64, None)) == 64


def test_a_slice_of_a_draw_is_that_slice_of_the_whole_draw():
    whole_rng, sliced_rng = np.random.default_rng(11), np.random.default_rng(11)
    image, residual = (
        draw_input(ALL_TYPES, 6, whole_rng),
        draw_out_residual(ALL_TYPES, 6, whole_rng),
    )
    images = draw_slices(draw_input, ALL_TYPES, 6, sliced_rng)
    residuals = draw_slices(draw_out_residual, ALL_TYPES, 6, sliced_rng)
    assert np.array_equal(residuals[4:6], residual[4:6])
    assert np.array_equal(images[1:4], image[1:4])
    assert images.shape == image.shape
    assert whole_rng.uniform() == sliced_rng.uniform()  # left as the whole draws leave it
    rounded = images.rounded(PRECISIONS["float16"].round)  # an image at a time
    assert np.array_equal(rounded, PRECISIONS["float16"].round(image))


@pytest.mark.parametrize(
    ("text", "problem"), [("2XB", "not a size"), ("0", "above 0"), ("nan", "above 0")]
)
def test_a_memory_bound_that_is_not_a_size_is_refused_naming_the_option(text, problem):
    with pytest.raises(ValueError, match=rf"--gost-reference-memory={text}: .*{problem}"):
        BY_NAME["reference_memory"].value(text)
    assert BY_NAME["reference_memory"].value("1.5GB") == 1_500_000_000


def whole_rmse(got, value):
    """СКО from whole float64 copies, as the release before computed it."""
    difference = np.asarray(got, np.float64) - value
    return float(np.sqrt(np.mean(difference * difference)))


def exact(value):
    return ValueAndVariance(value, np.zeros_like(value), 2**-24)


@pytest.mark.parametrize("threshold", [None, 0.5])
def test_a_comparison_a_block_at_a_time_is_the_whole_arrays_at_float64_rounding(
    monkeypatch, threshold
):
    rng = np.random.default_rng(2)
    value = rng.uniform(-127, 128, (6, 5, 4, 3))
    reference = ValueAndVariance(value, rng.uniform(0, 1e-9, value.shape), 2**-24)
    got = (value + rng.normal(0, 1e-5, value.shape)).astype(np.float32)
    monkeypatch.setattr(harness, "COMPARED_BLOCK", 7)  # 52 blocks, the last one short
    check = check_array("a", got, reference, "float32", threshold)
    admissible = (
        2 * np.sqrt(np.mean(reference.var))
        if threshold is None
        else threshold * np.sqrt(np.mean(value**2))
    )
    assert check.rmse == pytest.approx(whole_rmse(got, value), rel=1e-13)
    assert check.admissible == pytest.approx(admissible, rel=1e-13)


def test_a_comparison_by_blocks_leaves_the_compared_array_as_it_was(monkeypatch):
    value = np.linspace(1.0, 2.0, 30)
    got = value + 1e-3  # a float64 host array (bfloat16's may be): no block is a view of it
    monkeypatch.setattr(harness, "COMPARED_BLOCK", 4)
    compared = got.copy()
    check = check_array("a", compared, exact(value), "bfloat16")
    assert check.rmse == pytest.approx(1e-3)
    assert np.array_equal(compared, got)


def test_a_reference_degenerate_in_one_block_only_is_judged_whole(monkeypatch):
    value = np.concatenate([np.full(8, 3.0), [4.0]])  # constant in its first two blocks
    monkeypatch.setattr(harness, "COMPARED_BLOCK", 4)
    assert harness.untrustworthy(value) is None
    assert harness.untrustworthy(np.full(9, 3.0)).startswith("the reference array is constant")
    zeros = np.zeros(200)
    zeros[-1] = 1.0  # 0.5 % non-zero, all in the last block
    assert "99.5% zeros" in harness.untrustworthy(zeros)


def test_a_network_items_kept_results_count_in_its_bound():
    held = results_held(FAN_OUT, 4, training=True)
    alone = smallest_bound(FAN_OUT, 4)
    with pytest.raises(MemoryBoundError, match=r"\(.* of it the results held whole\)$"):
        batch_slices(FAN_OUT, 4, alone, error_model=True, held=held)
    assert smallest_bound(FAN_OUT, 4, held) >= alone + held


def test_a_network_item_sliced_and_compared_by_blocks_gives_the_whole_batchs_figures(
    monkeypatch,
):
    def checks(memory):
        library = ReferenceLibrary(memory=memory)
        result = verify_network(NumpyBackend("float32"), FAN_OUT, "training", 4, 7, library=library)
        return {c.name: (c.rmse, c.admissible) for c in result.checks}

    whole = checks(10**9)
    monkeypatch.setattr(harness, "COMPARED_BLOCK", 5)
    sliced = checks(smallest_bound(FAN_OUT, 4, results_held(FAN_OUT, 4, training=True)))
    assert sliced.keys() == whole.keys() and len(whole) > 2
    for name, (rmse, admissible) in whole.items():
        # The reference moves at float64 rounding; a difference of float32's size shows it
        # some 10^8 times larger, still far below the difference itself.
        assert sliced[name][0] == pytest.approx(rmse, rel=1e-7), name
        assert sliced[name][1] == pytest.approx(admissible, rel=1e-12), name
