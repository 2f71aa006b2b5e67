"""What *compliant* needs (docs/standard.md §7.7), condition by condition: a session that
meets them all has no reason against it, and each one it misses is a reason that says so."""

import dataclasses

import pytest

from pytest_gostcnn.judgement.compliance import Findings, Provenance, ReasonKind, assess
from pytest_gostcnn.judgement.evaluation import Particulars
from pytest_gostcnn.machine.peak import Peak
from pytest_gostcnn.model.network import LATIN
from pytest_gostcnn.performance.contention import Contention
from pytest_gostcnn.performance.timing import CellTiming, Check, Timing
from pytest_gostcnn.reports.load import FORMAT, upgraded

SIX = tuple(LATIN.values())
MODES = ("training", "inference")
PASSED = Check(1, True, "correct", "output", 0.1, None)
FAILED = Check(7, False, "not correct", "output", 9e3, "output: СКО 1 vs СКОП 1e-4 (9e3x)")


QUIET = Contention(1.0, 2.0, 2, 0.02, 2.0, 0.01)  # a thread waited 1 % of the rounds' time
SHARED = Contention(1.0, 1.0, 2, 1.0, 4.0, 0.5)  # half of it: two busy loops beside it


def timing(latin: str, mode: str, checks=(PASSED,), cells: int = 1, load=QUIET) -> Timing:
    peak = Peak(1e12, "given (--gost-peak)")
    cell = [
        CellTiming(c, "cpu", 16, (1.0,), peak, f"{c:08x}", checks, contention=load)
        for c in range(cells)
    ]
    return Timing(latin, mode, "float32", 2, 1, 10**9, tuple(cell))


RUN = Particulars("float32", 2, 1, "cpu", Peak(1e12, "given (--gost-peak)"), 1e12, "numpy")


def compliant_facts(**changes) -> Findings:
    """A full-profile session on one cell in which everything was run and passed."""
    facts = Findings(
        modes=MODES,
        profile="full",
        networks=SIX,
        tables_held=6,
        verdicts={(latin, mode): "correct" for latin in SIX for mode in MODES},
        layer_items=88,
        layer_verdicts=("correct",) * 80 + ("reference-grade",) * 8,
        threshold=None,
        provenances={latin: Provenance("reconstruction", shipped=True) for latin in SIX},
        timings=tuple(timing(latin, mode) for latin in SIX for mode in MODES),
        cell_failures=(),
        particulars=RUN,
        evaluated=MODES,
    )
    return dataclasses.replace(facts, **changes)


def test_a_session_that_meets_every_condition_is_compliant():
    compliance = assess(compliant_facts())
    assert compliance.compliant and compliance.reasons == ()


def without(timings, latin, mode):
    return tuple(t for t in timings if (t.latin, t.mode) != (latin, mode))


FULL = compliant_facts()
# Each condition missed alone, and what its reason must say.
MISSED = [
    ("quick", {"profile": "quick"}, "quick profile: section 9.3 requires 1,000,000 images"),
    (
        "images-below-a-million",
        {"images": 999_999},
        "--gost-images=999999: section 9.3 requires 1,000,000 images per cell",
    ),
    (
        "networks-subset",
        {
            "networks": ("R", "Sh"),
            "timings": tuple(t for t in FULL.timings if t.latin in ("R", "Sh")),
        },
        "networks: 2 of 6 selected",
    ),
    (
        "network-not-verified",
        {"verdicts": {k: v for k, v in FULL.verdicts.items() if k != ("G", "training")}},
        "Г (G) training: not verified in this session",
    ),
    (
        "network-not-correct",
        {"verdicts": {**FULL.verdicts, ("G", "inference"): "not correct"}},
        "Г (G) inference: verified not correct",
    ),
    (
        "network-suite-failed",
        {"verdicts": {**FULL.verdicts, ("V", "training"): "not verified"}},
        "В (V) training: verified not verified",
    ),
    (
        "layers-deselected",
        {"layer_verdicts": ()},
        "layer items: 0 of 88 ran in this session (deselected by -k, -m, --deselect or --lf)",
    ),
    (
        "layers-failed",
        {"layer_verdicts": ("not correct", "not verified") + ("correct",) * 86},
        "layer items: 2 of 88 failed",
    ),
    ("threshold", {"threshold": 1e9}, "СКОП overridden by --gost-rmse-threshold=1e+09"),
    (
        "user-reconstruction",
        {"provenances": {**FULL.provenances, "R": Provenance("reconstruction", shipped=False)}},
        "tables: Р (R) is reconstruction, from --gost-tables",
    ),
    (
        "canonical",
        {"provenances": {**FULL.provenances, "V": Provenance("canonical", shipped=True)}},
        "tables: В (V) is shipped canonical",
    ),
    (
        "canonical-set",
        {
            "particulars": dataclasses.replace(RUN, table_set="canonical"),
            "provenances": {latin: Provenance("canonical", shipped=True) for latin in SIX},
        },
        "tables: the canonical set, the widely used networks at full size, not the standard's "
        "typical networks",
    ),
    (
        "check-failed",
        {
            "timings": without(FULL.timings, "S", "training")
            + (timing("S", "training", checks=(PASSED, FAILED)),)
        },
        "check failed: С (S) training, timed round 7: output: СКО",
    ),
    (
        "not-checked",
        {"timings": without(FULL.timings, "S", "inference") + (timing("S", "inference", ()),)},
        "not checked: С (S) inference",
    ),
    (
        "cell-shared",
        {
            "timings": without(FULL.timings, "R", "training")
            + (timing("R", "training", load=SHARED),)
        },
        "cell shared: Р (R) training: one of its threads waited for one of the cell's 2 cores "
        "50 % of the timed rounds' time",
    ),
    (
        "cell-failed",
        {
            "particulars": dataclasses.replace(RUN, cells=2),
            "cell_failures": ((1, ("test_network[Sh-inference-B2]",)),),
        },
        "cell 1: 1 item of the suite failed (first: test_network[Sh-inference-B2])",
    ),
    (
        "result-missing",
        {"timings": without(FULL.timings, "M", "inference")},
        "inference evaluation incomplete: no result for М (M)",
    ),
]


@pytest.mark.parametrize(("changes", "says"), [m[1:] for m in MISSED], ids=[m[0] for m in MISSED])
def test_each_condition_missed_is_a_reason_that_says_so(changes, says):
    compliance = assess(compliant_facts(**changes))

    assert not compliance.compliant
    assert any(text.startswith(says) for text in compliance.texts()), compliance.texts()


def test_the_reason_format_3_wrote_for_a_test_never_checked_reads_as_the_judge_writes_it():
    never = without(FULL.timings, "S", "inference") + (timing("S", "inference", ()),)
    (text,) = [t for t in assess(compliant_facts(timings=never)).texts() if "S)" in t]
    written = "not audited: С (S) inference has a cell with no audited round"  # format 3's
    old = {
        "format": "pytest-gostcnn report 3",
        "noncompliance_reasons": [written],
        "benchmarks": [{"noncompliance_reasons": [written], "cells": []}],
    }
    new = upgraded(old)
    assert new["format"] == FORMAT
    assert new["noncompliance_reasons"] == [text] == new["benchmarks"][0]["noncompliance_reasons"]


def test_an_image_count_of_a_million_replaces_the_profile_and_may_be_compliant():
    # --gost-images replaces the profile: its count decides, not the profile left at quick.
    assert assess(compliant_facts(profile="quick", images=1_000_000)).compliant


def test_official_tables_a_user_loads_may_be_compliant():
    official = {latin: Provenance("official", shipped=False) for latin in SIX}
    assert assess(compliant_facts(provenances=official)).compliant


def test_a_failed_check_concerns_its_own_test_and_its_modes_evaluation_only():
    timings = without(FULL.timings, "S", "training") + (timing("S", "training", (FAILED,)),)
    compliance = assess(compliant_facts(timings=timings))

    assert compliance.for_test("S", "training") and not compliance.for_test("S", "inference")
    assert not compliance.for_test("R", "training")  # another network's result stands
    assert compliance.for_evaluation("training") and not compliance.for_evaluation("inference")


def test_a_missing_result_concerns_the_evaluation_not_the_tests_that_ran():
    compliance = assess(compliant_facts(timings=without(FULL.timings, "M", "inference")))

    assert not compliance.for_test("G", "inference")
    evaluation = compliance.for_evaluation("inference")
    assert [r.kind for r in evaluation] == [ReasonKind.EVALUATION_INCOMPLETE]


def test_a_run_wide_reason_concerns_every_result():
    compliance = assess(compliant_facts(threshold=0.5))

    assert all(compliance.for_test(latin, mode) for latin in SIX for mode in MODES)
    assert all(compliance.for_evaluation(mode) for mode in MODES)


def test_a_shared_cell_concerns_its_own_test_only_and_one_not_measured_is_no_reason():
    shared = without(FULL.timings, "R", "training") + (timing("R", "training", load=SHARED),)
    compliance = assess(compliant_facts(timings=shared))
    assert [r.kind for r in compliance.for_test("R", "training")] == [ReasonKind.CELL_SHARED]
    assert compliance.for_test("R", "inference") == ()
    unmeasured = dataclasses.replace(SHARED, wait_seconds=None)
    alone = without(FULL.timings, "R", "training") + (timing("R", "training", load=unmeasured),)
    assert assess(compliant_facts(timings=alone)).compliant


def test_a_report_that_predates_the_delay_keeps_its_reason_in_its_own_words():
    # Its threads waited 1 s of their 2 s ready time; no delay was counted then.
    earlier = dataclasses.replace(SHARED, delay_seconds=None)
    shared = without(FULL.timings, "R", "training") + (timing("R", "training", load=earlier),)
    (reason,) = assess(compliant_facts(timings=shared)).for_test("R", "training")
    assert "its threads waited for one of the cell's 2 cores 50 % of their ready time" in (
        reason.text
    )
