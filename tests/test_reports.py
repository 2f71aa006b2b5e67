"""Reports read back: a stopped run resumed, single-network runs merged, and the
checker that recomputes every figure and names each one edited.

Runs are real, in fresh interpreters, on the six tiny tables and the shrunk full profile of
tests/gost_helpers.py. A clock that advances exactly 2**-7 s per reading
(``--benchmark-timer``) makes every round last the same time in every run, so two runs
can be compared figure for figure, times included.
"""

import copy
import json
import os
import subprocess
import sys
from fnmatch import fnmatch
from pathlib import Path

import jsonschema
import pytest
from gost_helpers import FIXED_CLOCK, SCHEMA_VALIDATOR, TINY, directory, suite

from pytest_gostcnn.__main__ import main
from pytest_gostcnn.judgement import compliance
from pytest_gostcnn.model.network import LATIN
from pytest_gostcnn.performance import plan as plan_module
from pytest_gostcnn.reports.check import check_report
from pytest_gostcnn.reports.load import configuration, differences
from pytest_gostcnn.reports.merge import MergeError, merge_reports
from pytest_gostcnn.reports.schema import _unknown_keywords, report_schema, validate

STOP = '''"""Interrupt the run once its first performance test has finished, as Ctrl-C would."""
import pytest


@pytest.hookimpl(trylast=True)
def pytest_runtest_logfinish(nodeid, location):
    if "test_benchmark" in nodeid:
        raise KeyboardInterrupt
'''
STOP_IN_SECTION_8 = STOP.replace('"test_benchmark" in nodeid', '"test_network" in nodeid')
COPY = '''"""Keep a copy of the report as each performance test leaves it (a checkpoint)."""
import pathlib
import shutil

import pytest

COPIES = []


@pytest.hookimpl(trylast=True)
def pytest_runtest_logfinish(nodeid, location):
    if "test_benchmark" in nodeid:
        COPIES.append(nodeid)
        shutil.copy("report.json", f"checkpoint-{len(COPIES)}.json")
'''
# One more compliance condition, as a later change would add it: one function in the one
# list the judge asks (pytest_gostcnn/judgement/compliance.py).
CONDITION = """
from pytest_gostcnn.judgement.compliance import Reason, ReasonKind


def one_more(findings):
    if "M" not in findings.networks:
        return []
    text = "one more condition: М (M) unmet"
    return [Reason(ReasonKind.NOT_CHECKED, text, "inference", "M", words="one more")]
"""
ADD_CONDITION = f'''"""The judge with one more condition, in every process loading this plugin."""
{CONDITION}
from pytest_gostcnn.judgement import compliance

compliance.CONDITIONS = (*compliance.CONDITIONS, one_more)
'''
# A cell other work shares: at each reading the thread has waited 1 s more for a core and
# the rounds' clock has moved 1 s, so each timed round waits as long as it lasts (loaded
# after gost_tiny_full, which leaves the waiting unmeasured).
SHARED_CELL = '''"""Each timed round a thread waits for a core all of its 1 s: a shared cell."""
import time
import types

from pytest_gostcnn.performance import contention

_waited, _clock = [0.0], [0.0]


def waited(tasks=""):
    _waited[0] += 1.0
    return {1: _waited[0]}


def clock():
    _clock[0] += 1.0
    return _clock[0]


contention.waited_seconds = waited
contention.time = types.SimpleNamespace(perf_counter=clock, process_time=time.process_time)
'''
FIXED = (*TINY, FIXED_CLOCK, "--gost-mode=inference")


def run_dir(path: Path) -> Path:
    directory(path)
    (path / "gost_test_stop.py").write_text(STOP, encoding="utf-8")
    (path / "gost_test_stop_8.py").write_text(STOP_IN_SECTION_8, encoding="utf-8")
    (path / "gost_test_copy.py").write_text(COPY, encoding="utf-8")
    (path / "gost_test_condition.py").write_text(ADD_CONDITION, encoding="utf-8")
    (path / "gost_test_shared.py").write_text(SHARED_CELL, encoding="utf-8")
    return path


@pytest.fixture(autouse=True)
def tiny_full_profile(monkeypatch):
    """The checker in this process reads the full profile as the runs did (4 images)."""
    monkeypatch.setattr(plan_module, "FULL_PROFILE_IMAGES", 4)


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    """One run of all six networks: the baseline. It keeps a copy of its report as each
    performance test leaves it (``gost_test_copy``), which changes nothing the run does."""
    path = run_dir(tmp_path_factory.mktemp("whole"))
    run = suite(path, "--gost-backend=numpy", *FIXED, "-p", "gost_test_copy")
    assert run.returncode == 0, run.stdout[-3000:]
    return run


@pytest.fixture(scope="module")
def singles(tmp_path_factory):
    """Six runs, one network each, as six batch jobs would make them."""
    found = []
    for latin in LATIN.values():
        path = run_dir(tmp_path_factory.mktemp(f"single-{latin}"))
        run = suite(path, "--gost-backend=numpy", *FIXED, f"--gost-networks={latin}")
        assert run.report is not None, run.stdout[-3000:]
        found.append((str(path / "report.json"), run.report))
    return found


def _same_but_checks(report: dict) -> dict:
    """A report less what differs between runs of the same times: when it was written and
    how it was started (its command line, the load), what follows from each round's data
    key (drawn by the operating system: the checks' images and verdicts, the outputs'
    fingerprints, the first image), the checks' own seconds, the probes' and the cells'
    real wall and CPU times, the suite's own seconds and what says the run was resumed or
    merged."""
    report = copy.deepcopy(report)
    for key in ("created", "merged_from", "invocation"):
        report.pop(key, None)
    report["run"]["resumed_from"] = None
    for cell in report["cells"]:
        cell.pop("suite_seconds", None)
    for test in report["benchmarks"]:
        test["checks"]["seconds"] = None
        for cell in test["cells"]:
            cell["checks"] = cell["check_seconds"] = cell["contention"] = None
            cell["fingerprints"] = cell["first_image_crc32"] = cell["probe"] = None
    return report


# The checker. ------------------------------------------------------------------------


def test_the_checker_knows_every_keyword_of_the_schema_and_agrees_with_jsonschema(whole):
    assert _unknown_keywords(report_schema()) == []
    assert validate(whole.report) == []
    broken = copy.deepcopy(whole.report)
    broken["benchmarks"][0]["cells"][0]["round_seconds"][1] = "fast"
    del broken["options"]["seed"]
    broken["surplus"] = 1
    problems = validate(broken)
    assert len(problems) == 3, problems
    with pytest.raises(jsonschema.ValidationError):
        SCHEMA_VALIDATOR.validate(broken)


def test_check_passes_on_every_report_the_suite_writes(whole, singles):
    tables = whole.path / "tiny"
    assert check_report(whole.report, tables) == []
    for path, report in singles:
        assert check_report(report, tables) == [], path
    merged = merge_reports(singles).report
    assert check_report(merged, tables) == []


def test_check_passes_on_a_run_of_an_image_count_and_names_its_count_edited(tmp_path, monkeypatch):
    monkeypatch.setattr(plan_module, "FULL_PROFILE_IMAGES", 1_000_000)  # this run is not shrunk
    path = run_dir(tmp_path)
    args = ("--gost-tables=tiny", "--gost-batch=2", "--gost-images=5", "--gost-mode=inference")
    run = suite(path, "--gost-backend=numpy", *args, "--gost-networks=M,G")
    assert run.report is not None and run.report["options"]["images"] == 5, run.stdout[-2000:]
    assert [b["rounds"] for b in run.report["benchmarks"]] == [3, 3]
    assert check_report(run.report, path / "tiny") == []
    run.report["options"]["images"] = 1_000_000  # as if section 9.3's count had run
    problems = check_report(run.report, path / "tiny")
    assert any("rounds is" in p for p in problems), problems


def test_check_names_the_tables_it_needs_for_a_directory_of_tables(whole):
    (problem,) = check_report(whole.report)
    assert "--tables DIR" in problem


def _round_time(report):
    report["benchmarks"][2]["cells"][0]["round_seconds"][1] *= 0.5


def _orp(report):
    report["benchmarks"][0]["orp_percent"] *= 1.5


def _missing_test(report):
    del report["benchmarks"][3]


def _macs(report):
    report["benchmarks"][1]["macs_per_image"] += 1000


def _peak(report):
    report["cells"][0]["peak"] *= 0.5
    report["peak"]["macs_per_second"] *= 0.5


def _verdict(report):
    check = report["verification"]["networks"][0]["checks"][0]
    check["rmse"] = 2 * check["admissible_rmse"]


def _compliant(report):
    report["benchmarks"][4]["noncompliance_reasons"] = ["profile"]
    report["benchmarks"][4]["compliant"] = False


def _first_result(report):
    report["evaluations"][0]["first_result_percent"] += 0.01


def _dropped(report):
    evaluation = report["evaluations"][0]
    evaluation["dropped"] = next(
        k for k in evaluation["results_percent"] if k != evaluation["dropped"]
    )


def _checksum(report):
    report["options"]["table_checksums"]["M"] = "sha256:" + "0" * 64


def _rounds(report):
    test = report["benchmarks"][5]
    test["cells"][0]["round_seconds"].append(test["cells"][0]["round_seconds"][0])


def _spread(report):
    report["benchmarks"][0]["spread"]["noisy"] = True


def _check(report):
    check = report["benchmarks"][1]["cells"][0]["checks"][0]
    check["worst_ratio"] = 5.0  # the round differed, its verdict kept


def _tables_held(report):
    report["options"]["tables_held"] = 2


def _provenance(report):
    report["options"]["provenance"]["M"]["kind"] = "reconstruction"


def _peak_factors(report):
    report["peak"]["units"] *= 2


def _waiting(report):
    report["benchmarks"][3]["cells"][0]["contention"]["wait_seconds"] = 10.0  # shared kept out


def _repeated_output(report):
    prints = report["benchmarks"][1]["cells"][0]["fingerprints"]
    prints[1] = prints[0]  # judged as a result still


def _fingerprint_dropped(report):
    report["benchmarks"][2]["cells"][0]["fingerprints"].pop()


def _no_draw(report):
    # A check left out where every round is checked (the tiny full profile's 4 rounds).
    report["benchmarks"][3]["cells"][0]["checks"].pop()


def _power(report):
    report["benchmarks"][3]["checks"]["power"] = 0.999


def _chance(report):
    report["benchmarks"][3]["checks"]["chance"] = 0.5


def _probe(report):
    report["benchmarks"][0]["cells"][0]["probe"]["macs_per_second"] *= 0.5


def _schema(report):
    report["benchmarks"][0]["orp_percent"] = "high"


TAMPERING = {
    "a round time edited": (_round_time, "seconds is"),
    "an ОРП changed": (_orp, "orp_percent is"),
    "a test removed": (_missing_test, "noncompliance_reasons lacks"),
    "MACs per image edited": (_macs, "macs_per_image is"),
    "the peak halved": (_peak, "peak"),
    "an СКО above its СКОП, verdict kept": (_verdict, "its own СКО values say not"),
    "a test's reasons dropped": (_compliant, "noncompliance_reasons"),
    "the first result edited": (_first_result, "first_result_percent is"),
    "another test dropped": (_dropped, "dropped is"),
    "a table's checksum changed": (_checksum, "checksum"),
    "a round added": (_rounds, "round times for"),
    "the rounds' spread called noisy": (_spread, "spread: noisy is"),
    "a check's ratio above 1, passed kept": (_check, "not below 1"),
    "the tables said to hold fewer networks": (_tables_held, "tables_held is"),
    "a table's provenance renamed": (_provenance, "kind is"),
    "a peak's factors that do not multiply to it": (_peak_factors, "macs_per_second is"),
    "a figure of the wrong type": (_schema, "schema:"),
    "a cell's waiting for its cores edited": (_waiting, "contention: wait_share is None"),
    "an output repeated, still a result": (_repeated_output, "output repeated"),
    "a round's fingerprint dropped": (_fingerprint_dropped, "output fingerprints for"),
    "a check no draw leaves out": (_no_draw, "where every unit is checked"),
    "the checks' stated power edited": (_power, "checks: power is 0.999"),
    "the checks' stated chance edited": (_chance, "checks: chance is 0.5"),
    "a probe's rate halved": (_probe, "probe: macs_per_second is"),
}


@pytest.mark.parametrize("kind", TAMPERING)
def test_check_fails_on_each_kind_of_tampering(whole, kind):
    edit, words = TAMPERING[kind]
    report = copy.deepcopy(whole.report)
    edit(report)
    problems = check_report(report, whole.path / "tiny")
    assert problems, kind
    assert any(words in problem for problem in problems), problems


@pytest.fixture
def command(capsys):
    """``python -m pytest_gostcnn ARGS`` in folder ``cwd``, run as its ``__main__`` runs
    it but in this process (``main``; the full profile shrunk as the runs had it): its exit
    status and what it printed. tests/test_plot.py runs the module in a fresh interpreter."""

    def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
        capsys.readouterr()
        with pytest.MonkeyPatch.context() as patch:
            patch.chdir(cwd)
            try:
                status = main(list(args))
            except SystemExit as exit:  # argparse's usage errors
                status = exit.code
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(args, status, out, err)

    return run


def test_the_check_command_exits_0_only_when_every_figure_agrees(whole, tmp_path, command):
    report = whole.path / "report.json"
    done = command("check", str(report), "--tables", str(whole.path / "tiny"), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "every figure agrees" in done.stdout
    edited = copy.deepcopy(whole.report)
    _orp(edited)
    (tmp_path / "edited.json").write_text(json.dumps(edited), encoding="utf-8")
    done = command("check", "edited.json", "--tables", str(whole.path / "tiny"), cwd=tmp_path)
    assert done.returncode == 1 and "orp_percent is" in done.stdout
    (tmp_path / "half.json").write_text(json.dumps(whole.report)[:500], encoding="utf-8")
    done = command("check", "half.json", "absent.json", cwd=tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "half.json: not JSON" in done.stdout and "absent.json: no such file" in done.stdout


def test_a_condition_added_to_the_judge_reaches_the_summary_the_report_evaluate_and_check(
    whole, tmp_path, monkeypatch
):
    path = run_dir(tmp_path)
    run = suite(path, "--gost-backend=numpy", *FIXED, "-p", "gost_test_condition")
    reason = "one more condition: М (M) unmet"
    # the terminal summary
    assert f"not compliant: {reason}" in run.stdout
    assert "inference evaluation" in run.lines[-1]
    assert run.lines[-1].endswith("NOT COMPLIANT (one more)")
    # the report
    assert run.report["compliant"] is False and run.report["noncompliance_reasons"] == [reason]
    (test,) = [b for b in run.report["benchmarks"] if b["network"] == "M"]
    assert test["noncompliance_reasons"] == [reason] and "non-compliant" in test["designation"]
    assert run.report["evaluations"][0]["noncompliance_reasons"] == [reason]
    # check judges as the run did: without the condition it disagrees, with it it agrees
    problems = check_report(run.report, path / "tiny")
    assert "report: compliant is False, recomputed True" in problems, problems
    condition: dict = {}
    exec(CONDITION, condition)
    monkeypatch.setattr(compliance, "CONDITIONS", (*compliance.CONDITIONS, condition["one_more"]))
    assert check_report(run.report, path / "tiny") == []
    # evaluate judges the merged runs as the run did
    merged = merge_reports([("whole.json", whole.report)])
    assert merged.report["noncompliance_reasons"] == [reason]
    assert merged.report["evaluations"][0]["noncompliance_reasons"] == [reason]
    assert not whole.report["noncompliance_reasons"]


# Merging. -----------------------------------------------------------------------------


def _figures(report: dict) -> list[dict]:
    return [{k: v for k, v in e.items() if k != "comment"} for e in report["evaluations"]]


def test_six_single_network_runs_merged_give_the_evaluation_of_one_run(whole, singles):
    merged = merge_reports(singles)
    assert _figures(merged.report) == _figures(whole.report)
    # a layer item every job ran (the small edge cases) counts once; a layer at a network's
    # shape is each job's own item (its id names that network's rows)
    ids = merged.report["options"]["layer_item_ids"]
    assert len(ids) == len(set(ids)) == merged.report["options"]["layer_items"]
    small = set(whole.report["options"]["layer_item_ids"]) & set(
        singles[0][1]["options"]["layer_item_ids"]
    )
    assert small and small <= set(ids)
    assert len(ids) < sum(r["options"]["layer_items"] for _, r in singles)
    assert [layer["subject"] for layer in merged.report["verification"]["layers"]] == ids
    assert merged.report["evaluations"][0]["compliant"] is True
    assert [b["designation"] for b in merged.report["benchmarks"]] == [
        b["designation"] for b in whole.report["benchmarks"]
    ]
    assert (
        _same_but_checks(merged.report)["benchmarks"]
        == (_same_but_checks(whole.report)["benchmarks"])
    )


def test_the_evaluate_command_prints_the_evaluation_and_writes_the_merged_report(
    singles, tmp_path, command
):
    paths = [path for path, _ in singles]
    tables = str(Path(paths[0]).parent / "tiny")
    done = command("evaluate", *paths, "-o", "merged.json", "--tables", tables, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "evaluation ОП-П-float32-B1-N1:" in done.stdout and "first result:" in done.stdout
    written = json.loads((tmp_path / "merged.json").read_text(encoding="utf-8"))
    SCHEMA_VALIDATOR.validate(written)
    assert written["merged_from"] == [{"path": p, "created": r["created"]} for p, r in singles]
    done = command("evaluate", paths[0], "nowhere/x.json", "--tables", tables, cwd=tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr


def test_evaluate_with_an_output_where_no_file_can_be_written_is_a_usage_error(tmp_path, capsys):
    # A bad option of every command exits 2 (docs/api.md), before any report is read.
    status = main(["evaluate", str(tmp_path / "r.json"), "-o", "/nonexistent/x.json"])
    assert status == 2
    assert capsys.readouterr().err == (
        "error: -o=/nonexistent/x.json: the folder /nonexistent does not exist\n"
    )


def test_evaluate_refuses_a_report_that_does_not_check_naming_it_and_its_first_disagreement(
    singles, tmp_path, command
):
    (first, report), *others = singles
    tables = str(Path(first).parent / "tiny")
    halved = copy.deepcopy(report)
    for cell in halved["benchmarks"][0]["cells"]:  # twice as fast, the figures left as they were
        cell["round_seconds"] = [seconds / 2 for seconds in cell["round_seconds"]]
    (tmp_path / "halved.json").write_text(json.dumps(halved), encoding="utf-8")
    paths = ["halved.json", *(path for path, _ in others)]
    done = command("evaluate", *paths, "-o", "merged.json", "--tables", tables, cwd=tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("error: halved.json: does not check (python -m pytest_gostcnn check)")
    assert "seconds is" in line and not (tmp_path / "merged.json").exists()
    # a report of --gost-tables=DIR is checked against its tables, so evaluate needs them
    done = command("evaluate", first, cwd=tmp_path)
    assert done.returncode == 1 and "give it as --tables DIR" in done.stderr


def test_merge_refuses_another_configuration_and_one_test_with_two_times(singles, tmp_path):
    other = copy.deepcopy(singles[1][1])
    other["options"]["seed"] = 5
    with pytest.raises(MergeError, match="seed: 0 in .* 5 in b.json"):
        merge_reports([singles[0], ("b.json", other)])
    again = copy.deepcopy(singles[0][1])
    again["benchmarks"][0]["cells"][0]["round_seconds"][0] *= 2
    with pytest.raises(MergeError, match="with different times"):
        merge_reports([singles[0], ("again.json", again)])
    # the same result twice counts once
    assert len(merge_reports([singles[0], ("copy.json", singles[0][1])]).timings) == 1


# Stopped and resumed. -------------------------------------------------------------------


@pytest.fixture(scope="module")
def stopped(tmp_path_factory):
    """A full-profile run interrupted once its first test (М inference) finished."""
    path = run_dir(tmp_path_factory.mktemp("stopped"))
    run = suite(path, "--gost-backend=numpy", *FIXED, "-p", "gost_test_stop")
    assert run.report is not None, run.stdout[-3000:]
    (path / "stopped.json").write_text(json.dumps(run.report), encoding="utf-8")
    return run


def test_a_run_stopped_after_its_first_test_then_resumed_equals_an_uninterrupted_one(
    whole, stopped
):
    path, report = stopped.path, stopped.report
    assert stopped.returncode != 0
    assert report["complete"] is False and report["run"]["stopped"] == "interrupted"
    assert report["run"]["finished"] == ["ТП-М-П-float32-B1"]
    assert len(report["run"]["unfinished"]) == 5
    assert "run incomplete" in " ".join(report["noncompliance_reasons"])
    assert not report["evaluations"][0]["compliant"]
    assert "RUN INCOMPLETE (interrupted): 1 of 6 performance tests finished" in stopped.stdout
    assert check_report(report, path / "tiny") == []

    resumed = suite(path, "--gost-backend=numpy", *FIXED, "--gost-resume=stopped.json")
    assert resumed.returncode == 0, resumed.stdout[-3000:]
    assert "RESUMED from --gost-resume=" in resumed.stdout
    assert "was not used at all" not in resumed.stdout + resumed.stderr
    assert resumed.report["run"]["resumed_from"]["tests"] == ["ТП-М-П-float32-B1"]
    assert _same_but_checks(resumed.report) == _same_but_checks(whole.report)
    # the finished test was not timed again: its checks are the stopped run's
    assert resumed.report["benchmarks"][0]["cells"] == report["benchmarks"][0]["cells"]


def test_a_stopped_job_merged_with_jobs_that_ran_the_rest_is_whole(whole, stopped, singles):
    merged = merge_reports([(str(stopped.path / "stopped.json"), stopped.report), *singles[1:]])
    report = merged.report
    assert report["complete"] is True and report["run"]["stopped"] is None
    assert report["exit_status"] == 0 and report["run"]["unfinished"] == []
    assert _figures(report) == _figures(whole.report)
    assert check_report(report, whole.path / "tiny") == []


def test_a_resumed_run_stopped_again_in_section_8_keeps_the_tests_it_resumed(stopped):
    path = stopped.path
    (path / "report.json").write_text(json.dumps(stopped.report), encoding="utf-8")
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "gost_test_stop_8"]
    command += ["--gost-backend=numpy", *FIXED, "--gost-report=report.json"]
    command += ["--gost-resume=report.json"]
    env = {**os.environ, "PYTHONPATH": str(path)}
    done = subprocess.run(command, cwd=path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode != 0
    again = json.loads((path / "report.json").read_text(encoding="utf-8"))
    assert [b["designation"].split(" ")[0] for b in again["benchmarks"]] == ["ТП-М-П-float32-B1"]
    assert again["run"]["finished"] == ["ТП-М-П-float32-B1"] and again["complete"] is False
    assert check_report(again, path / "tiny") == []


def test_a_checkpoint_is_never_complete_and_a_killed_jobs_merges_whole(whole):
    path, run = whole.path, whole
    assert run.returncode == 0, run.stdout[-2000:]
    last = json.loads((path / "checkpoint-6.json").read_text(encoding="utf-8"))
    # written after the last test, before the run ended: what a job killed then keeps
    assert last["complete"] is False and last["exit_status"] is None
    assert last["run"]["unfinished"] == [] and len(last["benchmarks"]) == 6
    assert any(r.startswith("run not ended") for r in last["noncompliance_reasons"])
    assert check_report(last, path / "tiny") == []
    merged = merge_reports([("killed.json", last)]).report
    assert merged["complete"] is True and merged["exit_status"] == 0
    assert merged["compliant"] is True
    assert check_report(merged, path / "tiny") == []


def _format_2(report: dict) -> dict:
    """The report as format 2 wrote it: a round's check called an audit, as in format 3
    (``tests/data/report-format-3``), and a test's ``meets_image_count`` ``full_profile``."""
    old = copy.deepcopy(report)
    old["format"] = "pytest-gostcnn report 2"
    for test in old["benchmarks"]:
        test["full_profile"] = test.pop("meets_image_count")
        for cell in test["cells"]:
            cell["audits"], cell["audit_seconds"] = cell.pop("checks"), cell.pop("check_seconds")
    for cell in old["cells"]:
        cell["suite_seconds"]["audits"] = cell["suite_seconds"].pop("checks")
    return old


def test_a_report_of_format_2_is_read_by_check_evaluate_and_resume(
    whole, stopped, singles, tmp_path, command
):
    path = run_dir(tmp_path)
    (path / "old.json").write_text(json.dumps(_format_2(stopped.report)), encoding="utf-8")
    done = command("check", "old.json", "--tables", str(path / "tiny"), cwd=path)
    assert done.returncode == 0 and "every figure agrees" in done.stdout, done.stdout
    others = [p for p, _ in singles[1:]]
    done = command(
        "evaluate", "old.json", *others, "-o", "merged.json", "--tables", "tiny", cwd=path
    )
    assert done.returncode == 0, done.stdout + done.stderr
    merged = json.loads((path / "merged.json").read_text(encoding="utf-8"))
    assert merged["format"] == "pytest-gostcnn report 4"
    assert _figures(merged) == _figures(whole.report)
    resumed = suite(path, "--gost-backend=numpy", *FIXED, "--gost-resume=old.json")
    assert resumed.returncode == 0, resumed.stdout[-3000:]
    assert _same_but_checks(resumed.report) == _same_but_checks(whole.report)


def test_resume_without_a_report_to_keep_the_run_is_refused(stopped):
    # suite() always gives --gost-report: this run goes without
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--gost-backend=numpy",
         *FIXED, "--gost-resume=stopped.json"],
        cwd=stopped.path, capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": str(stopped.path)},
    )  # fmt: skip
    assert done.returncode == 4 and "Traceback" not in done.stderr
    assert "give --gost-report=PATH too" in done.stderr


def test_resume_refuses_a_report_of_another_configuration_listing_every_difference(whole, tmp_path):
    path = run_dir(tmp_path)
    (path / "earlier.json").write_text(json.dumps(whole.report), encoding="utf-8")
    run = suite(
        path,
        "--gost-backend=numpy",
        *FIXED,
        "--gost-seed=3",
        "--gost-networks=M,G",
        "--gost-resume=earlier.json",
    )
    assert run.returncode == 4 and "Traceback" not in run.stderr
    assert "another configuration" in run.stderr
    assert "seed: 3 here, 0 there" in run.stderr
    assert "networks: M,G here, M,G,V,S,R,Sh there" in run.stderr
    run = suite(
        path, "--gost-backend=numpy", *FIXED, "--gost-peak=1T", "--gost-resume=earlier.json"
    )
    assert run.returncode == 4 and "cell 0's peak (MAC/s): 1000000000000.0 here" in run.stderr
    threads = copy.deepcopy(whole.report)
    threads["invocation"]["environment"]["GOTO_NUM_THREADS"] = "7"
    threads["invocation"]["blas"][-1]["threads"] = 7  # the last: its text ends the list
    (path / "threads.json").write_text(json.dumps(threads), encoding="utf-8")
    run = suite(path, "--gost-backend=numpy", *FIXED, "--gost-resume=threads.json")
    assert run.returncode == 4 and "another configuration" in run.stderr
    assert "thread setup: {GOTO_NUM_THREADS: none} here, {GOTO_NUM_THREADS: 7} there" in run.stderr
    assert "1 thread here" in run.stderr and "7 threads there" in run.stderr  # BLAS
    edited = copy.deepcopy(whole.report)
    edited["benchmarks"][0]["macs_per_image"] *= 1000
    (path / "edited.json").write_text(json.dumps(edited), encoding="utf-8")
    run = suite(path, "--gost-backend=numpy", *FIXED, "--gost-resume=edited.json")
    assert run.returncode == 4 and "the report does not check" in run.stderr
    assert "macs_per_image is" in run.stderr
    (path / "not.json").write_text("{}", encoding="utf-8")
    run = suite(path, "--gost-backend=numpy", *FIXED, "--gost-resume=not.json")
    assert run.returncode == 4 and "not a --gost-report" in run.stderr


# A shared cell, and what a report says of how its run was started. -----------------------


@pytest.fixture(scope="module")
def shared_cell(tmp_path_factory):
    """Runs of М and Г on a shared cell, by verbosity (``-q``, ``""``, ``-v``), each made when
    a test first asks for it."""
    runs = {}

    def run(verbosity: str):
        if verbosity not in runs:
            path = run_dir(tmp_path_factory.mktemp("shared"))
            args = ("--gost-backend=numpy", *FIXED, "--gost-networks=M,G", "-p", "gost_test_shared")
            runs[verbosity] = suite(path, *args, *verbosity.split())
        return runs[verbosity]

    return run


def test_a_run_on_a_shared_cell_says_so_in_the_summary_and_the_report_and_check_agrees(
    shared_cell,
):
    run = shared_cell("")
    path = run.path
    assert run.report is not None, run.stdout[-3000:]
    assert "CELL SHARED (М (M) inference 100 %, Г (G) inference 100 %)" in run.stdout
    assert any(line.endswith("(SHARED)") for line in run.lines)
    test = run.report["benchmarks"][0]
    assert test["cells"][0]["contention"]["shared"] is True and test["compliant"] is False
    assert any(r.startswith("cell shared: М (M) inference") for r in test["noncompliance_reasons"])
    assert check_report(run.report, path / "tiny") == []
    unshared = copy.deepcopy(run.report)  # the cell said to be quiet, its reasons kept
    unshared["benchmarks"][0]["cells"][0]["contention"]["shared"] = False
    assert any("contention: shared is False" in p for p in check_report(unshared, path / "tiny"))


@pytest.mark.parametrize("verbosity", ["-q", "", "-v"], ids=["quiet", "default", "verbose"])
def test_a_shared_cell_is_warned_of_once_and_the_run_ends_with_each_evaluation(
    shared_cell, verbosity
):
    # Two tests on a shared cell: one CELL SHARED line names both (not a line per test),
    # and the last line is the evaluation's, with its designation and why not compliant.
    run = shared_cell(verbosity)
    assert run.report is not None, run.stdout[-3000:]
    warnings = [line for line in run.lines if line.startswith("CELL SHARED (")]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith("CELL SHARED (М (M) inference 100 %, Г (G) inference 100 %)")
    (evaluation,) = run.report["evaluations"]
    assert fnmatch(
        run.lines[-1],
        f"GOST R 57700.36-2021: inference evaluation {evaluation['designation']}: incomplete, "
        "no result for В (V), С (S), Р (R), Ш (Sh): NOT COMPLIANT (*cell shared*)",
    )
    assert run.lines[-2].startswith("GOST R 57700.36-2021: verification PASSED: ")
    reasons = [line for line in run.lines if "not compliant: cell shared: " in line]
    # -q leaves the reasons to the report; the default says them once, in the evaluation;
    # -v under each test and in the evaluation.
    assert len(reasons) == {"-q": 0, "": 1, "-v": 4}[verbosity]


def test_a_report_states_how_its_run_was_started(whole):
    invocation = whole.report["invocation"]
    assert "--gost-backend=numpy" in invocation["command"]
    assert invocation["cell_cores"] == len(os.sched_getaffinity(0))
    assert invocation["blas"] and all(b["threads"] == 1 for b in invocation["blas"])
    checkout = Path(__file__).resolve().parents[1]
    if (checkout / ".git").exists():
        head = subprocess.run(
            ["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        assert invocation["suite"]["commit"] == head
    header = [line for line in whole.lines if line.startswith("gostcnn: cell ")]
    assert len(header) == 1 and "; BLAS " in header[0] and " 1 thread" in header[0]


def test_a_report_of_format_3_before_the_invocation_and_the_contention_still_checks(whole):
    older = copy.deepcopy(whole.report)
    del older["invocation"]
    for test in older["benchmarks"]:
        for cell in test["cells"]:
            del cell["contention"]
    assert check_report(older, whole.path / "tiny") == []
    mine, theirs = configuration(whole.report), configuration(older)
    assert "threads" in mine and "threads" not in theirs
    assert differences(mine, theirs) == []  # what the older report does not state is not compared
