"""The summary's own lines, without pytest running a run: the last lines' counts and
evaluations, the words for a reader without Russian, what each verbosity prints of section
9, a progress line among pytest's results."""

from fnmatch import fnmatch
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_gostcnn.judgement.compliance import Findings, Provenance
from pytest_gostcnn.judgement.evaluation import Particulars
from pytest_gostcnn.judgement.judge import judge
from pytest_gostcnn.machine.peak import Peak
from pytest_gostcnn.model.network import LATIN
from pytest_gostcnn.model.table_files import load_networks
from pytest_gostcnn.performance.cells import Cells
from pytest_gostcnn.performance.contention import Contention
from pytest_gostcnn.performance.designations import transliterate
from pytest_gostcnn.performance.plan import plan
from pytest_gostcnn.performance.timing import CellTiming, Check, Timing
from pytest_gostcnn.plugin import rendering
from pytest_gostcnn.run import performance_summary
from pytest_gostcnn.run.resolution import Resolved
from pytest_gostcnn.run.results import Results, Selection, Verified
from pytest_gostcnn.run.summary import evaluation_line, last_line, terms

PASSED, FAILED = SimpleNamespace(failed=False), SimpleNamespace(failed=True)
NO_EVALUATION = SimpleNamespace(evaluations=[])


def verification(line: str) -> str:
    """The verification part of a last line."""
    return line.removeprefix("GOST R 57700.36-2021: ").partition("; no evaluation")[0]


def results(layers: int, networks: set, ran_layers: list, ran_networks: dict) -> Results:
    """A run that selected ``layers`` layer steps and ``networks``, of which those given ran."""
    selection = Selection(layer_steps=layers, networks=set(networks))
    return Results(selection=selection, verified=Verified(list(ran_layers), dict(ran_networks)))


def test_a_rerun_of_one_failed_layer_step_counts_that_step_alone():
    run = results(1, set(), [FAILED], {})
    assert verification(last_line(run, NO_EVALUATION)) == (
        "verification FAILED: 1 of 1 selected layer step failed; networks not run"
    )


def test_a_run_stopped_in_section_8_is_incomplete_not_passed():
    run = results(35, {("M", "training"), ("V", "training")}, [PASSED] * 5, {})
    assert verification(last_line(run, NO_EVALUATION)) == (
        "verification INCOMPLETE: 5 of 35 selected layer steps passed, 30 not run; "
        "2 selected networks not run"
    )


def test_a_run_whose_every_selected_item_passed_says_passed_with_its_counts():
    networks = {("M", "training"): PASSED, ("M", "inference"): PASSED}
    run = results(3, set(networks), [PASSED] * 3, networks)
    assert verification(last_line(run, NO_EVALUATION)) == (
        "verification PASSED: 3 of 3 selected layer steps passed; 2 of 2 selected networks passed"
    )


def test_a_failure_counts_among_the_selected_and_names_what_did_not_run():
    run = results(4, {("M", "inference")}, [PASSED, FAILED], {("M", "inference"): FAILED})
    assert verification(last_line(run, NO_EVALUATION)) == (
        "verification FAILED: 1 of 4 selected layer steps failed, 2 not run; "
        "1 of 1 selected network failed"
    )


def test_nothing_run_is_not_run():
    run = results(2, {("Sh", "inference")}, [], {})
    assert verification(last_line(run, NO_EVALUATION)) == (
        "verification NOT RUN: 2 selected layer steps not run; 1 selected network not run"
    )


@pytest.mark.parametrize(
    ("designation", "latin"),
    [("ТП-Ш-П", "TP-Sh-P"), ("ТП-Р-О-float32-B16", "TP-R-O-float32-B16"), ("ОП-О", "OP-O")],
)
def test_a_designation_in_latin_letters(designation, latin):
    assert transliterate(designation) == latin


def test_the_words_give_every_designation_of_the_run_in_latin_letters_once():
    networks = load_networks()
    resolved = Resolved("numpy", None, None, {k: networks[k] for k in ("R", "Sh")}, Cells())
    (latin,) = [line for line in terms(resolved, ("training",)) if "in Latin letters" in line]
    assert latin == "in Latin letters: ТП-Р-О = TP-R-O, ТП-Ш-О = TP-Sh-O, ОП-О = OP-O"


class Reporter:
    """What a progress line needs of pytest's terminal reporter, writing into ``text``."""

    def __init__(self, currentfspath) -> None:
        self.currentfspath, self.startpath, self.text = currentfspath, Path("/run"), ""

    def write_line(self, line: str) -> None:
        if self.currentfspath:
            self.text += "\n"
            self.currentfspath = None
        self.text += line + "\n"

    def write(self, content: str) -> None:
        self.text += content


@pytest.mark.parametrize(
    ("written", "again"),
    [(Path("/run/suite/conformance.py"), "suite/conformance.py "), ("x.py::test_a[1] ", None)],
    ids=["dots", "verbose"],
)
def test_a_progress_line_stands_alone_and_the_results_line_starts_again(written, again):
    reporter = Reporter(written)
    reporter.text = "suite/conformance.py ..."

    rendering.progress(reporter, "gostcnn: run estimate: about 1 s")

    again = again or written
    assert reporter.text == f"suite/conformance.py ...\ngostcnn: run estimate: about 1 s\n{again}"
    assert reporter.currentfspath == written  # its next result continues that line


def test_a_tests_time_keeps_its_figures_and_never_turns_exponential():
    # 2.004 s printed as "2" hid its digits; 12345 s as "1.23e+04" hid its size.
    times = (2.004, 0.01372, 57.3, 0.1, 0.99996, 99.996, 12345.6)
    assert [performance_summary.seconds_text(s) for s in times] == [
        "2.00",
        "0.0137",
        "57.3",
        "0.100",
        "1.00",
        "100",
        "12346",
    ]


# The evaluations' last lines, and section 9 at each verbosity, of a judged run. -----------

SIX = tuple(LATIN.values())
PEAK = Peak(1e12, "given (--gost-peak)")
QUIET = Contention(1.0, 2.0, 2, 0.02, 2.0, 0.01)  # a thread waited 1 % of the rounds' time
SHARED = Contention(1.0, 1.0, 2, 1.0, 4.0, 0.5)  # half of it: two busy loops beside it


def cell(checks, shared: bool) -> CellTiming:
    """Cell 0's one timed second of 16 images, its cores ``shared`` or quiet."""
    return CellTiming(
        0, "cpu", 16, (1.0,), PEAK, "0", checks, contention=SHARED if shared else QUIET
    )


def judged(profile: str = "full", networks=SIX, shared=()):
    """A judged inference run of ``networks`` that passed everything, the cell shared in the
    tests of ``shared``."""
    checks = (Check(1, True, "correct", "output", 0.1, None),)
    timings = tuple(
        Timing(latin, "inference", "float32", 2, 1, 10**9, (cell(checks, latin in shared),))
        for latin in networks
    )
    findings = Findings(
        modes=("inference",),
        profile=profile,
        networks=tuple(networks),
        tables_held=6,
        verdicts={(latin, "inference"): "correct" for latin in networks},
        layer_items=88,
        layer_verdicts=("correct",) * 88,
        threshold=None,
        provenances={latin: Provenance("reconstruction", shipped=True) for latin in SIX},
        timings=timings,
        cell_failures=(),
        particulars=Particulars("float32", 2, 1, "cpu", PEAK, 1e12, "numpy"),
        evaluated=("inference",),
    )
    return judge(findings)


def section_9(judgement, verbosity: int) -> list[str]:
    return performance_summary.performance_lines(
        plan("full", 2),
        "float32",
        PEAK,
        judgement.compliance,
        judgement.timings,
        judgement.evaluations,
        verbosity,
    )


def test_an_evaluation_has_a_line_of_its_own_with_its_designation_results_and_compliance():
    (evaluation,) = judged().evaluations
    assert fnmatch(
        evaluation_line(evaluation),
        "GOST R 57700.36-2021: inference evaluation ОП-П-float32-B2-N1: first result * %, "
        "second result *MAC/s: COMPLIANT",
    )


def test_an_incomplete_evaluation_says_what_it_lacks_and_every_kind_of_reason():
    (evaluation,) = judged("quick", networks=("M", "G")).evaluations
    assert fnmatch(
        evaluation_line(evaluation),
        "GOST R 57700.36-2021: inference evaluation ОП-П-float32-B2-N1 (quick, non-compliant): "
        "incomplete, no result for В (V), С (S), Р (R), Ш (Sh): NOT COMPLIANT (quick profile; "
        "networks deselected; evaluation incomplete)",
    )


def test_a_shared_cell_is_said_once_naming_every_test_it_concerns():
    lines = section_9(judged(shared=("M", "G")), 0)
    warnings = [line for line in lines if line.startswith("CELL SHARED")]
    assert len(warnings) == 1 and warnings[0].startswith(
        "CELL SHARED (М (M) inference 50 %, Г (G) inference 50 %): "
    )
    reasons = [line for line in lines if "not compliant: cell shared" in line]
    assert reasons == [
        "  not compliant: cell shared: М (M) inference, Г (G) inference "
        "(the CELL SHARED line above)"
    ]


def test_verbose_gives_each_shared_cell_its_own_reason_under_its_test_and_its_evaluation():
    lines = section_9(judged(shared=("M", "G")), 1)
    reasons = [line for line in lines if "not compliant: cell shared: " in line]
    assert len(reasons) == 4  # under each test, and in the evaluation
    assert sum(line.startswith("CELL SHARED") for line in lines) == 1


def test_a_comment_every_test_shares_is_said_once_and_verbose_says_it_under_each():
    judgement = judged()
    comment = judgement.timings[0].comment
    assert [line for line in section_9(judgement, 0) if comment in line] == [
        f"every test's {comment}"
    ]
    assert sum(comment in line for line in section_9(judgement, 1)) == 6 + 1  # the evaluation's


def test_quiet_gives_the_banners_and_a_row_per_test_and_leaves_the_evaluation_to_the_end():
    lines = section_9(judged("quick", shared=("M",)), -1)
    assert lines[0].startswith("QUICK PROFILE: NOT COMPLIANT")
    assert any(line.startswith("CELL SHARED (М (M) inference 50 %)") for line in lines)
    rows = [line for line in lines if line.startswith("ТП-")]
    assert len(rows) == 6 and lines[-6:] == rows
    assert not any(line.startswith(("  ", "evaluation ")) for line in lines)
