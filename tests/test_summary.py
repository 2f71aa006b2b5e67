"""The summary's own lines, without pytest running a run: the last line's counts, the words
for a reader without Russian, a progress line among pytest's results."""

from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_gostcnn.model.network import load_networks
from pytest_gostcnn.performance.cells import Cells
from pytest_gostcnn.performance.designations import transliterate
from pytest_gostcnn.plugin import rendering
from pytest_gostcnn.run import performance_summary
from pytest_gostcnn.run.resolution import Resolved
from pytest_gostcnn.run.results import Results
from pytest_gostcnn.run.summary import last_line, terms

PASSED, FAILED = SimpleNamespace(failed=False), SimpleNamespace(failed=True)
NO_EVALUATION = SimpleNamespace(evaluations=[])


def verification(line: str) -> str:
    """The verification part of a last line."""
    return line.removeprefix("GOST R 57700.36-2021: ").partition("; no evaluation")[0]


def results(layers: int, networks: set, ran_layers: list, ran_networks: dict) -> Results:
    """A run that selected ``layers`` layer steps and ``networks``, of which those given ran."""
    run = Results(layer_steps_selected=layers, networks_selected=set(networks))
    run.layers, run.networks = list(ran_layers), dict(ran_networks)
    return run


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
    assert [performance_summary._seconds(s) for s in times] == [
        "2.00",
        "0.0137",
        "57.3",
        "0.100",
        "1.00",
        "100",
        "12346",
    ]
