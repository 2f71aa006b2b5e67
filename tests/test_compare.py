"""Each test against a baseline report's: ``python -m pytest_gostcnn compare`` and
``--gost-compare``/``--gost-compare-fail``, which fail on a median round slower than the
baseline's by more than the allowed percent at 95 % confidence, and pass otherwise.

The rule is tested on timings built as data; the command on reports derived from one real
run on the fixed clock of tests/gost_helpers.py (every round 2**-7 s, so no spread): a
report's round times are scaled and every figure judged anew (``merge_reports`` of that one
report), so that it still checks. One more run shows the plugin's exit status 6, with the
fallen tests failures in its JUnit XML.
"""

import copy
import dataclasses
import json
from pathlib import Path
from xml.etree import ElementTree

import numpy as np
import pytest
from gost_helpers import FIXED_CLOCK, UNMEASURED_SHARING, directory, suite

from pytest_gostcnn.__main__ import main
from pytest_gostcnn.machine.peak import Peak
from pytest_gostcnn.performance.cells import Cells
from pytest_gostcnn.performance.contention import Contention
from pytest_gostcnn.performance.timing import CellTiming, Timing
from pytest_gostcnn.reports.check import check_report
from pytest_gostcnn.reports.compare import FELL, compare, median_slowdown
from pytest_gostcnn.reports.merge import merge_reports
from pytest_gostcnn.run import outcome
from pytest_gostcnn.run.options import Options
from pytest_gostcnn.run.resolution import resolve
from pytest_gostcnn.run.resume import baseline

RUN = ("--gost-backend=numpy", "--gost-tables=tiny", "--gost-batch=1", "--gost-networks=M,G")
RUN += ("--gost-mode=inference", FIXED_CLOCK, *UNMEASURED_SHARING)


def _timing(latin: str, rounds: list[float]) -> Timing:
    cell = CellTiming(0, "cpu", len(rounds), tuple(rounds), Peak(1e9, "given"), "0")
    return Timing(latin, "inference", "float32", 1, len(rounds), 10**8, (cell,))


EVEN = [1.0] * 8  # no spread: every round the median
SLOWER = [1.25] * 8  # a quarter slower, every round
ONE_SLOW_ROUND = [1.0] * 7 + [3.0]  # the mean (the ОРП's) 25 % slower, the median not
# Rounds of a run on a busy machine: 1 s give or take a fifth, drawn once with a fixed seed.
NOISY = [1.0 + 0.2 * x for x in np.random.default_rng(1).uniform(-1, 1, 16)]


def _change(then: list[float], now: list[float], allowed: float | None = 5):
    (change,) = compare("base.json", [_timing("M", then)], [_timing("M", now)], allowed).changes
    return change


def test_a_uniform_slowdown_beyond_the_allowed_percent_falls():
    change = _change(EVEN, SLOWER)
    assert change.slowdown == pytest.approx(25.0) and change.slowdown_at_least == pytest.approx(25)
    assert change.change == pytest.approx(-20.0) and change.fell


def test_identical_rounds_never_fall_however_they_spread():
    for rounds in (EVEN, NOISY, ONE_SLOW_ROUND, [1.0, 9.0, 1.0]):
        change = _change(rounds, list(rounds), allowed=0)
        assert change.slowdown == 0.0 and not change.fell


def test_a_slowdown_within_the_rounds_spread_is_not_significant_and_does_not_fall():
    # the median 10 % slower, beyond 5 %, but rounds of 1 s and 2 s: the bootstrap's median
    # of either run lies anywhere from 1 to 2 s, so the lower end is far below 5 %
    then = [1.0, 2.0] * 4
    now = [1.1, 2.2] * 4
    change = _change(then, now)
    assert change.slowdown == pytest.approx(10.0) and change.slowdown_at_least < 5
    assert not change.fell


def test_a_significant_slowdown_within_the_allowed_percent_does_not_fall():
    change = _change(NOISY, [1.03 * s for s in NOISY], allowed=5)
    assert change.slowdown == pytest.approx(3.0) and not change.fell
    assert _change(EVEN, [1.03] * 8, allowed=1).fell  # the same 3 % beyond 1 %: it falls


def test_one_slow_round_moves_the_mean_not_the_median_and_does_not_fall():
    change = _change(EVEN, ONE_SLOW_ROUND)
    assert change.change == pytest.approx(-20.0) and change.slowdown == 0.0
    assert not change.fell


def test_the_interval_is_drawn_with_a_fixed_seed_so_a_comparison_repeats():
    now = [s * 1.06 for s in reversed(NOISY)]
    assert median_slowdown(NOISY, now) == median_slowdown(NOISY, now)
    assert median_slowdown(NOISY, now, seed=1) != median_slowdown(NOISY, now)


def _shared(timing: Timing) -> Timing:
    """``timing`` with its cell shared: it waited for a core 30 % of its ready time."""
    busy = Contention(wall_seconds=8, cpu_seconds=7, cores=2, wait_seconds=3, load_average=4)
    return dataclasses.replace(
        timing, cells=(dataclasses.replace(timing.cells[0], contention=busy),)
    )


def test_a_test_whose_cell_was_shared_in_either_run_is_not_compared():
    even, slower = _timing("M", EVEN), _timing("M", SLOWER)
    assert compare("base.json", [even], [slower], 5).changes[0].fell
    for then, now, where in (
        (even, _shared(slower), "this run"),
        (_shared(even), slower, "the baseline"),
        (_shared(even), _shared(slower), "the baseline and this run"),
    ):
        (change,) = compare("base.json", [then], [now], 5).changes
        assert change.shared_in == where and not change.fell


def test_without_an_allowed_slowdown_nothing_falls_and_a_gain_never_does():
    assert not _change(EVEN, SLOWER, allowed=None).fell
    change = _change(SLOWER, EVEN, allowed=0)
    assert change.change == pytest.approx(25.0) and not change.fell


def test_a_test_timed_in_one_run_only_is_listed_and_does_not_fall():
    comparison = compare("base.json", [_timing("M", EVEN)], [_timing("G", SLOWER)], 5)
    assert [(c.test, c.timed_in, c.slowdown) for c in comparison.changes] == [
        ("ТП-М-П-float32-B1", "baseline", None),
        ("ТП-Г-П-float32-B1", "now", None),
    ]
    assert comparison.reason() is None


def test_a_fall_makes_a_passing_run_exit_6_and_a_failing_one_keep_its_status():
    fallen = compare("base.json", [_timing("M", EVEN)], [_timing("M", SLOWER)], 5)
    status, reason = outcome.gated(0, None, fallen)
    assert status == FELL == 6
    assert reason.startswith("slower than the baseline base.json by more than 5 %")
    assert "ТП-М-П-float32-B1 median round +25.0 % (at least +25.0 % at 95%)" in reason
    status, reason = outcome.gated(1, "1 of 9 selected items of the suite failed", fallen)
    assert status == 1 and reason.startswith("1 of 9 selected items") and "slower than" in reason
    within = compare("base.json", [_timing("M", EVEN)], [_timing("M", ONE_SLOW_ROUND)], 5)
    assert outcome.gated(0, None, within) == (0, None)


# The command, on reports that check. --------------------------------------------------


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One real run of two tiny networks on the fixed clock: the baseline."""
    done = suite(directory(tmp_path_factory.mktemp("compare")), *RUN)
    assert done.returncode == 0, done.stdout[-3000:]
    return done


def _rounds(report: dict, edit) -> dict:
    """``report`` with every test's round times edited by ``edit`` and every figure judged
    anew from them, so that it checks."""
    edited = copy.deepcopy(report)
    for test in edited["benchmarks"]:
        for cell in test["cells"]:
            cell["round_seconds"] = edit(cell["round_seconds"])
    return merge_reports([("edited", edited)]).report


def _write(folder: Path, name: str, report: dict) -> str:
    (folder / name).write_text(json.dumps(report), encoding="utf-8")
    return str(folder / name)


def _omp(run) -> str:
    """The run's OMP_NUM_THREADS as a difference shows it (``none``: unset)."""
    return run.report["invocation"]["environment"].get("OMP_NUM_THREADS") or "none"


def _compare(*args: str) -> int:
    return main(["compare", *args])


def test_compare_fails_with_6_on_a_slowdown_and_prints_the_table(run, tmp_path, capsys):
    tables = str(run.path / "tiny")
    base = _write(tmp_path, "base.json", run.report)
    slower = _write(tmp_path, "slower.json", _rounds(run.report, lambda r: [s * 1.25 for s in r]))
    assert check_report(json.loads(Path(slower).read_text()), tables) == []
    assert _compare(base, slower, "--fail", "5", "--tables", tables) == FELL
    out = capsys.readouterr().out
    assert "ТП-М-П-float32-B1" in out and "-20.0" in out
    assert out.count("+25.0      +25.0  FELL") == 2
    assert out.splitlines()[-1].startswith("exit status 6: slower than the baseline")
    # without --fail the table alone, and exit 0
    assert _compare(base, slower, "--tables", tables) == 0
    assert "FELL" not in capsys.readouterr().out


def test_compare_passes_identical_reports_a_slow_round_and_a_gain(run, tmp_path, capsys):
    tables = str(run.path / "tiny")
    base = _write(tmp_path, "base.json", run.report)
    assert _compare(base, base, "--fail=0", "--tables", tables) == 0
    assert capsys.readouterr().out.count("+0.0       +0.0  ok") == 2
    # one round of each test 1 + 0.25 x rounds times the others: the mean 25 % above the
    # median, the ОРП 20 % lower, the median round the same
    noisy = _rounds(run.report, lambda r: [*r[:-1], r[-1] * (1 + 0.25 * len(r))])
    assert (
        _compare(base, _write(tmp_path, "noisy.json", noisy), "--fail=5", "--tables", tables) == 0
    )
    assert capsys.readouterr().out.count("-20.0           +0.0       +0.0  ok") == 2
    faster = _rounds(run.report, lambda r: [s / 2 for s in r])
    assert (
        _compare(base, _write(tmp_path, "fast.json", faster), "--fail=0", "--tables", tables) == 0
    )
    assert "+100.0" in capsys.readouterr().out


def test_compare_refuses_another_configuration_listing_each_difference(run, tmp_path, capsys):
    tables = str(run.path / "tiny")
    base = _write(tmp_path, "base.json", run.report)
    other = copy.deepcopy(run.report)
    other["options"]["seed"] = 3
    other["system"]["backend"]["device"] = "another CPU"
    assert _compare(base, _write(tmp_path, "other.json", other), "--tables", tables) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "not of the configuration of the baseline" in line
    assert "seed: 3 in " in line and "device: another CPU in " in line
    # a runner of another thread setup or BLAS moves the ОРП: refused; a baseline that does
    # not state them (a report before them) is not compared on them
    threaded = copy.deepcopy(run.report)
    threaded["invocation"]["environment"]["OMP_NUM_THREADS"] = "37"
    for library in threaded["invocation"]["blas"]:
        library["threads"] += 1
    assert _compare(_write(tmp_path, "threaded.json", threaded), base, "--tables", tables) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert f"thread setup: {{OMP_NUM_THREADS: {_omp(run)}}} in " in line
    assert "{OMP_NUM_THREADS: 37} in " in line
    assert ("; BLAS: " in line) == bool(run.report["invocation"]["blas"])
    older = copy.deepcopy(run.report)
    del older["invocation"]
    assert _compare(_write(tmp_path, "older.json", older), base, "--tables", tables) == 0
    # a new version of the backend is what a gate compares
    newer = copy.deepcopy(run.report)
    newer["system"]["backend"]["version"] = "99.0"
    assert _compare(base, _write(tmp_path, "newer.json", newer), "--tables", tables) == 0


def test_compare_refuses_a_baseline_that_is_missing_not_json_or_does_not_check(
    run, tmp_path, capsys
):
    tables = str(run.path / "tiny")
    now = _write(tmp_path, "now.json", run.report)
    halved = copy.deepcopy(run.report)
    for cell in halved["benchmarks"][0]["cells"]:
        cell["round_seconds"] = [s / 2 for s in cell["round_seconds"]]
    (tmp_path / "half.json").write_text(json.dumps(run.report)[:300], encoding="utf-8")
    for baseline_file, says in (
        (_write(tmp_path, "halved.json", halved), "halved.json: does not check"),
        (str(tmp_path / "absent.json"), "absent.json: no such file"),
        (str(tmp_path / "half.json"), "half.json: not JSON"),
    ):
        assert _compare(baseline_file, now, "--fail=5", "--tables", tables) == 2
        (line,) = capsys.readouterr().err.splitlines()
        assert line.startswith("error: ") and says in line


# The plugin. -------------------------------------------------------------------------


def _options(**texts: str) -> Options:
    given = dict(arg.removeprefix("--gost-").split("=") for arg in RUN if arg.startswith("--gost"))
    return Options.parse({**given, **texts})


def test_the_plugin_refuses_a_baseline_of_another_configuration_or_a_limit_without_one(
    run, monkeypatch
):
    monkeypatch.chdir(run.path)  # where --gost-tables=tiny is, as in the run
    base = str(run.path / "report.json")
    options = _options(compare=base, seed="3", compare_fail="5")
    with pytest.raises(ValueError, match="another configuration") as refused:
        baseline(options, resolve(options, Cells()))
    assert "seed: 3 in this run, 0 in the baseline" in str(refused.value)
    threaded = copy.deepcopy(run.report)
    threaded["invocation"]["environment"]["OMP_NUM_THREADS"] = "37"
    options = _options(compare=_write(run.path, "threaded.json", threaded))
    with pytest.raises(ValueError, match="another configuration") as refused:
        baseline(options, resolve(options, Cells()))
    said = f"thread setup: {{OMP_NUM_THREADS: {_omp(run)}}} in this run, {{OMP_NUM_THREADS: 37}}"
    assert said in str(refused.value)
    options = _options(compare_fail="5")
    with pytest.raises(ValueError, match="^--gost-compare-fail=5: give the baseline too"):
        baseline(options, resolve(options, Cells()))
    options = _options(compare=base)
    path, tests = baseline(options, resolve(options, Cells()))
    assert path == base and [t.name for t in tests] == ["ТП-М-П-float32-B1", "ТП-Г-П-float32-B1"]


def test_a_run_slower_than_its_baseline_exits_6_and_fails_those_tests_in_junit(run, tmp_path):
    path = directory(tmp_path)
    fast = _write(path, "fast.json", _rounds(run.report, lambda r: [s / 2 for s in r]))
    xml = path / "junit.xml"
    done = suite(path, *RUN, f"--gost-compare={fast}", "--gost-compare-fail=5", f"--junitxml={xml}")
    assert done.returncode == 6, done.stdout[-3000:] + done.stderr[-2000:]
    assert done.stdout.count("+100.0     +100.0  FELL") == 2
    assert "gostcnn: exit status 6: slower than the baseline" in done.stdout
    assert done.lines[-2].startswith("GOST R 57700.36-2021: verification PASSED: ")
    assert done.report["exit_status"] == 6 and "slower than" in done.report["exit_reason"]
    # the standard's compliance is not the gate's: no "items failed" reason for them
    assert not any("items of the suite failed" in r for r in done.report["noncompliance_reasons"])
    suite_element = ElementTree.parse(xml).getroot().find("testsuite")
    assert suite_element.get("failures") == "2"
    failed = {
        case.get("name"): case.find("failure").get("message")
        for case in suite_element.iter("testcase")
        if case.find("failure") is not None
    }
    assert set(failed) == {"test_benchmark[M-inference-B1]", "test_benchmark[G-inference-B1]"}
    for message in failed.values():
        assert "slower than the baseline" in message and "median round +100.0 %" in message
