"""How a run ends, without pytest running one: this cell's exit status and why, and the run
state the report and the summary give (``run/outcome.py``)."""

import pytest

from pytest_gostcnn.performance.cells import Cells
from pytest_gostcnn.performance.timing import CellTiming, Timing
from pytest_gostcnn.run.options import Options
from pytest_gostcnn.run.outcome import ExitCode, exit_status, not_run, run_state, stop_reason
from pytest_gostcnn.run.resolution import Resolved
from pytest_gostcnn.run.results import Earlier, Outcomes, Reported, Results, Selection, Timed

# Two layer items and two performance tests of the suite, as pytest selected them.
NODES = ["suite::test_layer[a]", "suite::test_network[M]", "suite::bench[M]", "suite::bench[V]"]
BENCHMARKS = {"suite::bench[M]": ("M", "training"), "suite::bench[V]": ("V", "training")}


def _options(**texts: str) -> Options:
    return Options.parse({"mode": "training", "batch": "2", **texts})


def _resolved(available: bool = True) -> Resolved:
    return Resolved(
        backend_name="numpy",
        backend=object() if available else None,
        unavailable=None if available else "no device",
        networks={},
        cells=Cells(),
    )


def _results(
    outcomes: dict[str, str] | None = None,
    skips: tuple[str, ...] = (),
    earlier: Earlier | None = None,
    **records,
) -> Results:
    """A run that collected and selected ``NODES``, with ``outcomes`` of those that ran
    and the ``skips`` among them."""
    selection = Selection(len(NODES), len(NODES), list(NODES), dict(BENCHMARKS))
    results = Results(earlier or Earlier(), selection, Outcomes(skips=list(skips)), **records)
    results.outcomes.by_item.update(outcomes or {})
    return results


def _all(outcome: str = "passed") -> dict[str, str]:
    return dict.fromkeys(NODES, outcome)


def _timing(latin: str) -> Timing:
    cell = CellTiming(
        cell=0, device="cpu", images=4, round_seconds=(1.0, 1.0), peak=None, first_image="0"
    )
    return Timing(
        latin=latin,
        mode="training",
        dtype="float32",
        batch=2,
        rounds=2,
        macs_per_image=10,
        cells=(cell,),
    )


def test_the_exit_codes_are_pytests():
    assert {code.name: int(code) for code in ExitCode} == {
        code.name: int(pytest.ExitCode[code.name]) for code in ExitCode
    }


@pytest.mark.parametrize(
    ("status", "should_stop", "should_fail", "why"),
    [
        (2, False, False, "interrupted"),  # Ctrl-C, whatever else pytest says
        (1, "stopping after 1 failures", False, "stopping after 1 failures"),
        (1, False, "Interrupted: 1 error", "Interrupted: 1 error"),
        (0, False, False, None),
    ],
)
def test_why_a_run_stopped(status, should_stop, should_fail, why):
    assert stop_reason(status, should_stop, should_fail) == why


def test_a_run_that_did_not_collect_the_suite_keeps_pytests_status():
    results = Results()
    assert exit_status(5, None, _options(), _resolved(), results) == (5, None)


def test_every_selected_item_passed_is_exit_status_0():
    assert exit_status(0, None, _options(), _resolved(), _results(_all())) == (0, None)


def test_a_failed_item_fails_the_run_and_keeps_a_status_pytest_gave():
    outcomes = {**_all(), "suite::test_layer[a]": "failed"}
    status, why = exit_status(0, None, _options(), _resolved(), _results(outcomes))
    assert (status, why) == (ExitCode.TESTS_FAILED, "1 of 4 selected items of the suite failed")
    assert exit_status(3, None, _options(), _resolved(), _results(outcomes))[0] == 3


def test_a_skipped_item_fails_a_run_that_pytest_passed():
    results = _results({**_all(), "suite::bench[V]": "skipped"}, skips=("not verified",))
    results.verified.networks[("M", "training")] = object()  # something was verified
    status, why = exit_status(0, None, _options(), _resolved(), results)
    assert status == ExitCode.TESTS_FAILED
    assert why == (
        "1 of 4 selected items of the suite were skipped (first: not verified); exit status 0 "
        "needs every one run and passed"
    )


def test_a_run_whose_every_item_skipped_says_nothing_was_verified():
    results = _results(_all("skipped"), skips=("no device",))
    assert exit_status(0, None, _options(), _resolved(), results)[1].startswith(
        "nothing was verified: 4 of 4 selected items"
    )


def test_an_unavailable_backend_fails_the_run_unless_allowed():
    results = _results(_all("skipped"), skips=("no device",))
    status, why = exit_status(0, None, _options(), _resolved(available=False), results)
    assert status == ExitCode.TESTS_FAILED
    assert why.startswith("nothing was verified: backend numpy is unavailable (no device)")
    allowed = _options(allow_unavailable="true")
    status, why = exit_status(0, None, allowed, _resolved(available=False), results)
    assert status == 0 and "--gost-allow-unavailable keeps the exit status" in why


def test_nothing_selected_is_no_tests_collected():
    results = _results()
    results.selection.selected = 0  # -k matched none of them
    status, why = exit_status(0, None, _options(), _resolved(), results)
    assert status == ExitCode.NO_TESTS_COLLECTED
    assert why == (
        "nothing was verified: none of the suite's 4 items was selected (-k, -m, --deselect "
        "or --lf)"
    )


def test_a_stopped_run_says_what_it_did_not_run_and_how_to_continue(tmp_path):
    outcomes = {"suite::test_layer[a]": "passed", "suite::test_network[M]": "passed"}
    report = str(tmp_path / "r.json")
    status, why = exit_status(
        0, "interrupted", _options(report=report), _resolved(), _results(outcomes)
    )
    assert status == ExitCode.INTERRUPTED
    assert why == (
        "the run stopped (interrupted) with 2 performance tests and 0 other items of the suite "
        "not run; the report keeps the finished tests, "
        f"--gost-resume={report} --gost-report={report} continues the run"
    )
    why = exit_status(1, "interrupted", _options(), _resolved(), _results(outcomes))[1]
    assert why.endswith("nothing was kept (no --gost-report)")


def test_a_report_that_could_not_be_written_mid_run_is_exit_3_saying_what_it_keeps(tmp_path):
    report = str(tmp_path / "r.json")
    outcomes = {"suite::test_layer[a]": "passed", "suite::bench[M]": "passed"}
    results = _results(
        outcomes, reported=Reported(failure="could not write --gost-report: disk full")
    )
    # Even where pytest says the run was interrupted (the plugin stopped it) or failed.
    for pytest_status in (ExitCode.INTERRUPTED, ExitCode.TESTS_FAILED):
        status, why = exit_status(pytest_status, "x", _options(report=report), _resolved(), results)
        assert status == ExitCode.INTERNAL_ERROR
        assert why == (
            "the run stopped at once: could not write --gost-report: disk full; "
            f"this run wrote nothing to {report}"
        )
    results.reported.kept = ["ТП-М-О-float32-B2"]
    why = exit_status(2, "x", _options(report=report), _resolved(), results)[1]
    assert why.endswith(
        f"; {report} keeps the 1 performance test finished before (ТП-М-О-float32-B2); "
        f"--gost-resume={report} --gost-report={report} continues from them"
    )


def test_a_run_whose_every_item_ran_is_complete_once_it_ended():
    state = run_state(_options(), _results(_all()))
    assert state["complete"] is True
    assert state["finished"] == ["ТП-М-О-float32-B2", "ТП-В-О-float32-B2"]
    assert state["unfinished"] == [] and state["other_items_not_run"] == 0
    assert run_state(_options(), _results(_all()), ended=False)["complete"] is False


def test_a_test_kept_from_the_resumed_report_counts_as_finished():
    outcomes = {node: "passed" for node in NODES if node != "suite::bench[V]"}
    assert run_state(_options(), _results(outcomes))["unfinished"] == ["ТП-В-О-float32-B2"]
    results = _results(outcomes, earlier=Earlier({("V", "training"): _timing("V")}))
    state = run_state(_options(), results)
    assert state["complete"] is True
    assert state["finished"] == ["ТП-М-О-float32-B2", "ТП-В-О-float32-B2"]
    assert not_run(_options(), results) == (0, [])


def test_a_run_stopped_in_a_test_names_the_rounds_it_timed():
    underway = ("ТП-М-О-float32-B2", 3, 10)  # the test, its timed rounds ended, its rounds
    results = _results({"suite::test_layer[a]": "passed"}, timed=Timed(now=underway))
    state = run_state(_options(), results, "interrupted")
    assert state["stopped_in"] == {
        "test": "ТП-М-О-float32-B2",
        "timed_rounds_done": 3,
        "rounds": 10,
    }
    assert not_run(_options(), results) == (1, ["ТП-М-О-float32-B2", "ТП-В-О-float32-B2"])


def test_nothing_is_not_run_before_pytest_selected_the_items():
    assert not_run(_options(), Results()) == (0, [])
