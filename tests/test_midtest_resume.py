"""A long performance test checkpointed at its boundaries and resumed from the last one
(docs/benchmarking.md, "Checkpoints inside a test"; docs/report.md).

The checkpoints' clock and the rounds of a resumed test are checked in this process; one
chain of runs in fresh interpreters, on the tiny tables with a clock that advances a fixed
step per reading and each round's data key fixed by its round (``STOP``), is killed
mid-test, resumed, interrupted mid-test, resumed again, and ends equal to an uninterrupted
run.
"""

import copy
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from gost_helpers import FIXED_CLOCK, directory, suite

from pytest_gostcnn.backends.numpy import NumpyBackend
from pytest_gostcnn.model.table_files import load_networks
from pytest_gostcnn.performance import partial
from pytest_gostcnn.performance import rounds as rounds_module
from pytest_gostcnn.performance.contention import Contention
from pytest_gostcnn.performance.loop import run
from pytest_gostcnn.performance.partial import CheckpointClock, PartialCell
from pytest_gostcnn.performance.plan import Plan
from pytest_gostcnn.performance.record import Passed
from pytest_gostcnn.performance.rounds import Rounds, TimedTest
from pytest_gostcnn.reports import load
from pytest_gostcnn.reports.check import check_report
from pytest_gostcnn.reports.load import FORMAT, ReportError, read_report
from pytest_gostcnn.reports.merge import merge_reports


def test_a_checkpoint_waits_its_seconds_and_a_hundred_times_its_last_writing():
    now = [0.0]
    clock = CheckpointClock(lambda: now[0])
    now[0] = partial.CHECKPOINT_SECONDS - 1
    assert not clock.due()
    now[0] = partial.CHECKPOINT_SECONDS
    assert clock.due()
    clock.wrote(10.0)  # a large report: 10 s to write
    now[0] += 10 / partial.CHECKPOINT_SHARE - 1
    assert not clock.due()
    now[0] += 1
    assert clock.due()


# The rounds of a resumed test, in this process. -----------------------------------------


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return load_networks(directory(tmp_path_factory.mktemp("tables")) / "tiny")["Sh"]


def _drive(rounds, seen, monkeypatch=None):
    """The rounds left, through the suite's loop; each timed round's output in ``seen``; the
    boundaries the loop passed. With ``monkeypatch``, each round's data key is its number's,
    so that two runs of the same rounds compute alike."""
    if monkeypatch is not None:
        monkeypatch.setattr(rounds_module, "round_key", lambda randomness=None: rounds.number + 1)
    target = rounds.target

    def delivered(*arguments):
        target(*arguments)
        if rounds.number:
            seen[rounds.number] = rounds.delivered[0]  # the output map, as delivered

    rounds.target = delivered
    return [event for event in run(rounds) if isinstance(event, Passed) and event.boundary]


@pytest.mark.parametrize("mode", ["training", "inference"])
def test_a_test_resumed_at_a_boundary_computes_the_rounds_an_uninterrupted_one_does(
    tiny, mode, monkeypatch
):
    backend, plan = NumpyBackend("float32"), Plan(None, 40, 1, 1, 40)
    through = {}
    whole = Rounds(TimedTest(backend, tiny, mode, plan, seed=5, device="cpu"))
    boundaries = _drive(whole, through, monkeypatch)
    # A boundary every 16 rounds, never the test's last, each with the rounds so far.
    assert [(b.done, b.boundary.done, len(b.share.round_seconds)) for b in boundaries] == [
        (16, 16, 16),
        (32, 32, 32),
    ]
    assert boundaries[0].share.device == "cpu" and boundaries[0].boundary.boundary == 16
    kept = PartialCell(0, "cpu", (1.0,) * 16, whole.first_image)
    again, resumed = Rounds(TimedTest(backend, tiny, mode, plan, seed=5), resume=kept), {}
    _drive(again, resumed, monkeypatch)
    assert sorted(resumed) == list(range(17, 41)) and again.done == 40
    for number, output in resumed.items():
        np.testing.assert_array_equal(output, through[number], err_msg=f"round {number}")
    with pytest.raises(ValueError, match="not a boundary"):
        Rounds(
            TimedTest(backend, tiny, mode, plan, seed=5),
            resume=PartialCell(0, "cpu", (1.0,) * 15, ""),
        )


def test_a_resumed_test_counts_its_contention_on_from_its_checkpoint(tiny):
    """The counts cover the same timed rounds as the test's times: the checkpoint's and this
    run's; a checkpoint without counts leaves them unknown, not a part's."""
    backend, plan = NumpyBackend("float32"), Plan(None, 40, 1, 1, 40)
    test = TimedTest(backend, tiny, "inference", plan, seed=5)
    cores = Rounds(test).meter.cores
    earlier = Contention(1000.0, 500.0, cores, None, None)
    kept = PartialCell(0, "cpu", (1.0,) * 16, "", contention=earlier)
    again = Rounds(test, resume=kept)
    at_boundary = [passed.share.contention for passed in _drive(again, {})]
    counted = again.meter.contention()
    assert 1000.0 < counted.wall_seconds < 1100.0 and 500.0 < counted.cpu_seconds < 600.0
    assert counted.cores == cores and counted.wait_seconds is None  # not measured before
    assert [c.wall_seconds > 1000.0 for c in at_boundary] == [True]  # round 32, carried on
    unknown = PartialCell(0, "cpu", (1.0,) * 16, "")  # a checkpoint before the counts
    again = Rounds(test, resume=unknown)
    at_boundary = [passed.share.contention for passed in _drive(again, {})]
    assert again.meter.contention() is None and at_boundary == [None]


# Killed, resumed, interrupted, resumed again. -------------------------------------------

STOP = '''"""A checkpoint at every boundary, each round's data key fixed by its cell, mode and
number (so that two runs compute alike), and the run stopped after timed round
GOST_TEST_STOP_AT of the GOST_TEST_STOP_MODE test: ended at once, as a kill ends it, or with
GOST_TEST_INTERRUPT interrupted, as Ctrl-C does. The threads' waiting goes unmeasured, so
that the machine's load decides nothing."""
import os

from pytest_gostcnn.performance import contention, partial, rounds

contention.waited_seconds = lambda tasks="": None
partial.CHECKPOINT_SECONDS = 0.0
_arguments = rounds.Rounds._arguments


def arguments(self, batch, number, key=None):
    mode = 1 + (self.mode == "training")
    rounds.round_key = lambda randomness=None: (self.cell << 64) | (mode << 32) | (number + 1)
    return _arguments(self, batch, number, key)


rounds.Rounds._arguments = arguments
AT, MODE = int(os.environ.get("GOST_TEST_STOP_AT", "0")), os.environ.get("GOST_TEST_STOP_MODE")
_begin = rounds.Rounds.begin


def begin(self):
    # The round after AT: its boundary's checkpoint, if any, is written by now.
    if self.mode == MODE and self.number == AT and self.calls > self.plan.warmup_rounds:
        if os.environ.get("GOST_TEST_INTERRUPT"):
            raise KeyboardInterrupt
        os._exit(137)
    return _begin(self)


rounds.Rounds.begin = begin
'''
RUN = (
    "--gost-backend=numpy",
    "--gost-tables=tiny",
    "--gost-batch=1",
    "--gost-images=40",
    "--gost-networks=Sh",
    FIXED_CLOCK,
    "-p",
    "gost_test_stop",
)


def _apart(report):
    """A report less when it was written, how it was started and where it resumed from, its
    cells' contention counts, probes and the suite's own seconds (times of the machine's,
    not the fixed clock's), and its checks apart, by test and round, less their seconds."""
    report, checks = copy.deepcopy(report), {}
    report.pop("created")
    report.pop("invocation")  # its command line and load differ
    report["run"]["resumed_from"] = None
    for cell in report["cells"]:
        assert cell.pop("suite_seconds")["network_verification"] > 0  # the suite's own: times
    for test in report["benchmarks"]:
        test["checks"].pop("seconds")
        test.pop("copy_share")  # the warm-up's, timed by the machine's clock
        for cell in test["cells"]:
            assert cell.pop("contention")["wall_seconds"] > 0  # counted, times apart
            assert cell.pop("probe")["macs_per_second"] > 0  # timed by the machine's clock
            for check in cell.pop("checks"):
                check.pop("seconds")
                checks[(test["mode"], check["round"])] = check
            cell["check_seconds"] = None
    return report, checks


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    """An uninterrupted run of Ш (Sh) training and inference, 40 rounds each; the same run
    killed after training's timed round 20, resumed and interrupted after inference's
    timed round 20, and resumed again."""
    path = directory(tmp_path_factory.mktemp("chain"))
    (path / "gost_test_stop.py").write_text(STOP, encoding="utf-8")
    runs = {"whole": suite(path, *RUN)}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GOST_TEST_STOP_MODE", "training")
        patch.setenv("GOST_TEST_STOP_AT", "20")
        runs["killed"] = suite(path, *RUN)
        (path / "killed.json").write_text(json.dumps(runs["killed"].report), encoding="utf-8")
        patch.setenv("GOST_TEST_STOP_MODE", "inference")
        patch.setenv("GOST_TEST_INTERRUPT", "1")
        runs["stopped"] = suite(path, *RUN, "--gost-resume=killed.json")
        (path / "stopped.json").write_text(json.dumps(runs["stopped"].report), encoding="utf-8")
        patch.delenv("GOST_TEST_STOP_MODE")
        runs["resumed"] = suite(path, *RUN, "--gost-resume=stopped.json")
    return runs


def test_a_test_killed_mid_way_keeps_its_last_boundary(chain):
    whole, killed = chain["whole"], chain["killed"]
    assert whole.returncode == 0, whole.stdout[-3000:]
    # Too few units for the power to spare any: training's 3 segments, inference's 40 rounds.
    assert [len(c["checks"]) for t in whole.report["benchmarks"] for c in t["cells"]] == [3, 40]
    assert killed.returncode == 137
    kept = killed.report["run"]["partial"]  # the checkpoint after timed round 16
    assert kept["test"] == "ТП-Ш-О-float32-B1" and kept["timed_rounds_done"] == 16
    assert [(a["round"], a["rounds"]) for a in kept["cells"][0]["checks"]] == [(1, 16)]
    assert killed.report["complete"] is False
    assert check_report(killed.report, killed.path / "tiny") == []
    training = whole.report["benchmarks"][0]["cells"][0]
    assert kept["cells"][0]["round_seconds"] == training["round_seconds"][:16]


def test_a_resumed_test_goes_on_and_an_interrupt_keeps_the_next_ones_boundary(chain):
    stopped = chain["stopped"]
    assert stopped.returncode == 2, stopped.stdout[-3000:]
    assert "went on from its checkpoint: its first 16 timed rounds" in stopped.stdout
    run = stopped.report["run"]
    assert run["stopped"] == "interrupted" and run["finished"] == ["ТП-Ш-О-float32-B1"]
    assert run["stopped_in"]["timed_rounds_done"] == 20
    assert run["partial"]["test"] == "ТП-Ш-П-float32-B1"
    assert run["partial"]["timed_rounds_done"] == 16
    assert run["partial"]["cells"][0]["contention"]["wall_seconds"] > 0  # counted so far
    assert "the report keeps it after timed round 16" in stopped.stdout
    assert check_report(stopped.report, stopped.path / "tiny") == []


def test_the_resumed_run_reports_what_an_uninterrupted_one_does(chain):
    resumed, whole = chain["resumed"], chain["whole"]
    assert resumed.returncode == 0, resumed.stdout[-3000:]
    assert resumed.report["run"]["resumed_from"]["continued"] == {
        "test": "ТП-Ш-П-float32-B1",
        "timed_rounds_kept": 16,
    }
    assert resumed.report["run"]["partial"] is None
    # Every round time, every figure, every fingerprint and every check, its image drawn
    # from a batch of one: the same.
    report, checks = _apart(resumed.report)
    whole_report, whole_checks = _apart(whole.report)
    assert report == whole_report
    assert checks == whole_checks and len(checks) == 3 + 40
    assert check_report(resumed.report, resumed.path / "tiny") == []


# A report of format 3, which called a round's check an audit. -------------------------

# The stopped run of ``chain`` as the release before format 4 wrote it (format 3: a cell's
# ``audits`` and ``audit_seconds``, the suite's ``audits`` seconds), with its tables.
FORMAT_3 = Path(__file__).parent / "data" / "report-format-3"


def test_a_report_of_format_3_reads_as_format_4_and_checks(monkeypatch):
    text = (FORMAT_3 / "stopped.json").read_text(encoding="utf-8")
    assert '"format": "pytest-gostcnn report 3"' in text and '"audits"' in text
    report = read_report(FORMAT_3 / "stopped.json")
    assert report["format"] == FORMAT and "audit" not in json.dumps(report)
    written = json.loads(text)
    for old, new in ((written["benchmarks"][0], report["benchmarks"][0]),
                     (written["run"]["partial"], report["run"]["partial"])):  # fmt: skip
        assert [c["checks"] for c in new["cells"]] == [c["audits"] for c in old["cells"]]
        assert new["cells"][0]["check_seconds"] == old["cells"][0]["audit_seconds"] > 0
    assert report["cells"][0]["suite_seconds"]["checks"] > 0
    assert check_report(report, FORMAT_3 / "tiny") == []
    # Read as it was written, the schema of format 4 refuses it.
    monkeypatch.setattr(load, "upgraded", lambda report: report)
    assert check_report(read_report(FORMAT_3 / "stopped.json"), FORMAT_3 / "tiny") != []


def test_a_report_of_format_3_keeps_the_names_a_user_gave_and_refuses_a_field_twice(tmp_path):
    old = json.loads((FORMAT_3 / "stopped.json").read_text(encoding="utf-8"))
    old["options"]["backend_options"] = {"audits": "1"}  # a backend's option, not a check
    old["invocation"]["environment"]["audit_seconds"] = "2"
    (tmp_path / "options.json").write_text(json.dumps(old), encoding="utf-8")
    report = read_report(tmp_path / "options.json")
    assert report["options"]["backend_options"] == {"audits": "1"}
    assert report["invocation"]["environment"]["audit_seconds"] == "2"
    assert check_report(report, FORMAT_3 / "tiny") == []
    old["benchmarks"][0]["cells"][0]["checks"] = []  # beside its audits: which is it?
    (tmp_path / "twice.json").write_text(json.dumps(old), encoding="utf-8")
    with pytest.raises(ReportError, match="twice.json: a format 3 report with both 'audits'"):
        read_report(tmp_path / "twice.json")


def test_a_run_resumed_from_a_report_of_format_3_keeps_its_work_and_goes_on(chain, tmp_path):
    path = directory(tmp_path)
    (path / "gost_test_stop.py").write_text(STOP, encoding="utf-8")
    # Its machine's facts made this machine's (the backend's version and device, the peak,
    # threads, cores, BLAS): resume holds a run to the configuration it started in, and the
    # file was written on another machine, with other libraries. Its tests stay as written.
    old = json.loads((FORMAT_3 / "stopped.json").read_text(encoding="utf-8"))
    for key in ("system", "invocation", "peak"):
        old[key] = chain["whole"].report[key]
    (path / "stopped.json").write_text(json.dumps(old), encoding="utf-8")
    resumed = suite(path, *RUN, "--gost-resume=stopped.json")
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr
    report = resumed.report
    assert report["format"] == FORMAT and "audit" not in json.dumps(report)
    continued = {"test": "ТП-Ш-П-float32-B1", "timed_rounds_kept": 16}
    assert report["run"]["resumed_from"]["continued"] == continued
    # The finished test kept as it was written; the partial one's 16 rounds and their checks
    # kept, its other 24 timed now.
    (training, inference) = [test["cells"][0] for test in report["benchmarks"]]
    finished, partial = old["benchmarks"][0]["cells"][0], old["run"]["partial"]["cells"][0]
    assert training["round_seconds"] == finished["round_seconds"]
    assert training["fingerprints"] == finished["fingerprints"]
    assert training["checks"] == finished["audits"]
    assert inference["round_seconds"][:16] == partial["round_seconds"]
    assert len(inference["round_seconds"]) == 40
    assert [c for c in inference["checks"] if c["round"] <= 16] == partial["audits"]
    assert check_report(report, path / "tiny") == []


# What check and resume refuse of a partial test. ---------------------------------------


def _edited(report, change):
    report = copy.deepcopy(report)
    change(report["run"]["partial"], report)
    return report


EDITS = {
    "not a boundary": lambda p, r: (
        p.update(timed_rounds_done=15),
        p["cells"][0]["round_seconds"].pop(),
        p["cells"][0]["checks"].pop(),
        p["cells"][0].update(seconds=sum(p["cells"][0]["round_seconds"])),
    ),
    "round times for 16 rounds": lambda p, r: p["cells"][0]["round_seconds"].pop(),
    "seconds is": lambda p, r: p["cells"][0]["round_seconds"].__setitem__(0, 1.0),
    "checked round 17 of 16": lambda p, r: p["cells"][0]["checks"][-1].update(round=17),
    "boundary_rounds is": lambda p, r: p.update(boundary_rounds=8),
    "yet is kept part-way": lambda p, r: r["run"]["finished"].append(p["test"]),
    "not one per cell": lambda p, r: p["cells"][0].update(cell=1),
    "contention: cpu_share is": lambda p, r: p["cells"][0]["contention"].update(cpu_share=2.0),
    "unit_rounds 17: a unit holds 1 to 1": lambda p, r: p["cells"][0].update(unit_rounds=17),
}


@pytest.mark.parametrize("problem", list(EDITS))
def test_check_names_a_partial_test_edited(chain, problem):
    edited = _edited(chain["stopped"].report, EDITS[problem])
    found = check_report(edited, chain["stopped"].path / "tiny")
    assert any(problem in line for line in found), found


def test_check_refuses_checks_no_draw_makes_up_to_the_boundary(chain):
    """A checkpoint whose first ten rounds are left unchecked where every round is checked
    (40 rounds: 1 % of them is less than one): no draw of the test's chance gives it."""

    def unchecked(p, r):
        p["cells"][0]["checks"] = [a for a in p["cells"][0]["checks"] if a["round"] > 10]

    stopped = chain["stopped"]
    found = check_report(_edited(stopped.report, unchecked), stopped.path / "tiny")
    assert any("where every unit is checked" in line for line in found), found


@pytest.mark.parametrize(
    ("k", "problem"),
    [
        (17, "unit_rounds 17: not a count of rounds within a segment of 16"),
        (4, "not one whole unit"),
    ],
)
def test_check_refuses_a_training_tests_unit_edited(chain, k, problem):
    # Its checks judged units of 16 rounds (the fixed clock's k): a unit longer than a
    # segment is no unit, and a shorter one makes them more than one unit each.
    report = copy.deepcopy(chain["whole"].report)
    (training,) = [t for t in report["benchmarks"] if t["mode"] == "training"]
    assert training["unit_rounds"] == 16
    training["unit_rounds"] = k

    found = check_report(report, chain["whole"].path / "tiny")

    assert any(problem in line for line in found), found


def test_check_reads_a_report_from_before_units_of_rounds_as_it_was_written(chain):
    # No unit_rounds anywhere: a training test's checks were whole segments.
    report = copy.deepcopy(chain["whole"].report)
    for test in report["benchmarks"]:
        test.pop("unit_rounds"), test.pop("copy_share"), test["checks"].pop("unit_rounds")
        if test["mode"] == "training":
            test["checks"]["unit"] = "segment"

    assert check_report(report, chain["whole"].path / "tiny") == []


def test_resume_refuses_an_inconsistent_partial_test(chain):
    path = chain["stopped"].path
    edited = _edited(chain["stopped"].report, EDITS["not a boundary"])
    (path / "edited.json").write_text(json.dumps(edited), encoding="utf-8")
    run = suite(path, *RUN, "--gost-resume=edited.json")
    assert run.returncode == 4 and "Traceback" not in run.stderr
    assert "the report does not check" in run.stderr and "not a boundary" in run.stderr


def test_a_merge_keeps_the_test_a_job_stopped_in_part_way_but_not_two(chain):
    killed, stopped = chain["killed"].report, chain["stopped"].report
    # The killed job kept training part-way; the stopped one finished training and kept
    # inference part-way: the merged run is the stopped one's, inference to go on from.
    merged = merge_reports([("killed.json", killed), ("stopped.json", stopped)]).report
    assert merged["run"]["unfinished"] == ["ТП-Ш-П-float32-B1"]
    assert merged["run"]["partial"] == stopped["run"]["partial"]
    assert check_report(merged, chain["stopped"].path / "tiny") == []
    other = copy.deepcopy(stopped)
    other["run"]["partial"]["cells"][0]["round_seconds"][0] *= 2
    both = merge_reports([("stopped.json", stopped), ("other.json", other)])
    assert both.report["run"]["partial"] is None
    [note] = both.notes
    assert "stopped.json" in note and "other.json" in note and "keeps none" in note


# Two computing cells. -------------------------------------------------------------------

MPIRUN = shutil.which("mpirun")


@pytest.mark.mpi
@pytest.mark.skipif(
    not (MPIRUN and importlib.util.find_spec("mpi4py")), reason="needs mpirun and mpi4py"
)
def test_two_cells_killed_mid_test_keep_both_shares_and_resume(tmp_path):
    path = directory(tmp_path)
    (path / "gost_test_stop.py").write_text(STOP, encoding="utf-8")
    env = {
        **os.environ,
        "OMPI_ALLOW_RUN_AS_ROOT": "1",
        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
        "OMPI_MCA_rmaps_base_oversubscribe": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "PYTHONPATH": str(path),
    }
    command = [MPIRUN, "-n", "2", sys.executable, "-m", "pytest", "-p", "no:cacheprovider"]
    command += [*RUN, "--gost-mode=training"]
    stop = {"GOST_TEST_STOP_MODE": "training", "GOST_TEST_STOP_AT": "20"}
    subprocess.run(
        [*command, "--gost-report=killed.json"], cwd=path, env={**env, **stop},
        capture_output=True, timeout=300,
    )  # fmt: skip
    killed = json.loads((path / "killed.json").read_text(encoding="utf-8"))
    kept = killed["run"]["partial"]
    assert kept["timed_rounds_done"] == 16 and [c["cell"] for c in kept["cells"]] == [0, 1]
    assert kept["cells"][0]["first_image_crc32"] != kept["cells"][1]["first_image_crc32"]
    done = subprocess.run(
        [*command, "--gost-report=resumed.json", "--gost-resume=killed.json"], cwd=path,
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    resumed = json.loads((path / "resumed.json").read_text(encoding="utf-8"))
    assert check_report(resumed, path / "tiny") == []
    for share, cell in zip(kept["cells"], resumed["benchmarks"][0]["cells"], strict=True):
        assert cell["round_seconds"][:16] == share["round_seconds"]
        assert len(cell["round_seconds"]) == 40
        assert [a for a in cell["checks"] if a["round"] <= 16] == share["checks"]
