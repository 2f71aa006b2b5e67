"""Section 9 arithmetic: ОРП, the 9.8 evaluation, and the designations."""

import pytest

from pytest_gostcnn.judgement.evaluation import designate_evaluation, evaluate
from pytest_gostcnn.judgement.from_report import particulars
from pytest_gostcnn.performance.designations import designate_test
from pytest_gostcnn.performance.timing import relative_real_performance

SIX = {"M": 10.0, "G": 20.0, "V": 30.0, "S": 40.0, "R": 50.0, "Sh": 60.0}


def test_orp_is_macs_over_time_over_peak_in_percent():
    # 1e9 MAC per image x 100 images in 2 s = 5e10 MAC/s; of a 1e12 MAC/s peak: 5%.
    assert relative_real_performance(10**9, 100, 2.0, 1e12) == pytest.approx(5.0)


@pytest.mark.parametrize(("seconds", "peak"), [(0.0, 1e12), (1.0, 0.0), (-1.0, 1e12)])
def test_orp_needs_positive_time_and_peak(seconds, peak):
    with pytest.raises(ValueError):
        relative_real_performance(1, 1, seconds, peak)


def test_evaluation_drops_the_smallest_and_averages_the_other_five():
    evaluation = evaluate("training", SIX, system_peak=1e12)
    assert evaluation.dropped == "M"
    assert evaluation.first == pytest.approx((20 + 30 + 40 + 50 + 60) / 5)
    # Second result = first x peak / 100, in MAC/s.
    assert evaluation.second == pytest.approx(40.0 * 1e12 / 100)


def test_equal_smallest_results_drop_one_of_them_and_the_mean_is_the_same():
    results = {**SIX, "M": 5.0, "R": 5.0}
    evaluation = evaluate("inference", results, system_peak=1e12)
    assert evaluation.dropped == "M"  # the first of the tied ones in the order М Г В С Р Ш
    assert evaluation.first == pytest.approx((20 + 30 + 40 + 5 + 60) / 5)


def test_fewer_than_six_results_compute_no_score_and_name_the_missing():
    results = {k: v for k, v in SIX.items() if k not in ("G", "Sh")}
    evaluation = evaluate("training", results, system_peak=1e12)
    assert not evaluation.complete
    assert evaluation.missing == ("G", "Sh")
    assert evaluation.first is None and evaluation.second is None and evaluation.dropped is None


def test_results_are_kept_in_the_standards_order():
    shuffled = dict(reversed(list(SIX.items())))
    assert list(evaluate("training", shuffled, 1.0).results) == ["M", "G", "V", "S", "R", "Sh"]


def test_test_designation_names_network_mode_type_and_batch():
    assert designate_test("R", "training", "float32", 16, True, True) == "ТП-Р-О-float32-B16"
    assert designate_test("Sh", "inference", "float16", 1, True, True) == "ТП-Ш-П-float16-B1"


def test_a_quick_result_is_never_designated_as_compliant():
    for compliant in (True, False):
        assert designate_test("R", "training", "float32", 16, False, compliant).endswith(
            " (quick, non-compliant)"
        )
        assert designate_evaluation("training", "float32", 16, 1, False, compliant).endswith(
            " (quick, non-compliant)"
        )


def test_a_result_of_fewer_images_than_section_9_3_names_its_count():
    assert designate_test("R", "training", "float32", 16, False, False, images=5000) == (
        "ТП-Р-О-float32-B16 (images=5000, non-compliant)"
    )
    assert designate_evaluation("inference", "float32", 1, 1, False, False, images=5000) == (
        "ОП-П-float32-B1-N1 (images=5000, non-compliant)"
    )


def test_a_full_profile_result_that_is_not_compliant_says_so():
    assert designate_test("R", "training", "float32", 16, True, False) == (
        "ТП-Р-О-float32-B16 (non-compliant)"
    )
    assert designate_evaluation("training", "float32", 16, 1, True, False) == (
        "ОП-О-float32-B16-N1 (non-compliant)"
    )


def test_evaluation_designation_names_mode_type_batch_and_cells():
    assert designate_evaluation("inference", "float32", 64, 4, True, True) == (
        "ОП-П-float32-B64-N4"
    )


def test_a_canonical_set_result_is_labelled_with_the_set():
    # standard.md §5: the canonical set is never compliant; its results name it.
    assert designate_test("R", "training", "float32", 16, True, False, "canonical") == (
        "ТП-Р-О-float32-B16 (canonical set, non-compliant)"
    )
    assert designate_evaluation("inference", "float32", 1, 1, False, False, "canonical") == (
        "ОП-П-float32-B1-N1 (canonical set, quick, non-compliant)"
    )
    assert designate_test("R", "training", "float32", 16, True, True, "user") == (
        "ТП-Р-О-float32-B16"
    )


@pytest.mark.parametrize(
    ("given", "declared", "named"),
    [
        ("numpy", "numpy", "backend numpy 2.0"),  # a registered name, its own
        ("mymod:Mine", "mine", "backend mine (mymod:Mine) 2.0"),
        ("mymod:Mine", "mymod:Mine", "backend mymod:Mine 2.0"),  # a report before the name
    ],
)
def test_the_software_comment_names_the_backend_as_it_names_itself_and_as_given(
    given, declared, named
):
    report = {
        "options": {"dtype": "float32", "batch": 2, "cells": 1, "table_set": "reconstructions"},
        "system": {"python": "3.11.7", "libraries": {"numpy": "2.0"}},
        "peak": None,
        "cells": [{"peak": None}],
    }
    report["options"]["backend"] = given
    report["system"]["backend"] = {"name": declared, "version": "2.0", "device": "CPU"}
    assert particulars(report).software == f"Python 3.11.7, numpy 2.0, {named}"
