"""Constants and helpers shared by the project's tests: the report schema, the test backends,
the small run, and runs of the suite in a fresh interpreter on six tiny tables."""

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import jsonschema
import pytest

from pytest_gostcnn.model.network import LATIN
from pytest_gostcnn.performance.loop import record_of, run
from pytest_gostcnn.performance.plan import Plan

HERE = Path(__file__).parent
REPOSITORY = HERE.parent
SCHEMA = json.loads(
    (REPOSITORY / "pytest_gostcnn" / "reports" / "report.schema.json").read_text(encoding="utf-8")
)
# jsonschema's own check of the schema, done once: ``jsonschema.validate`` checks the schema
# against its metaschema at every call, half a second a report.
jsonschema.validators.validator_for(SCHEMA).check_schema(SCHEMA)
SCHEMA_VALIDATOR = jsonschema.validators.validator_for(SCHEMA)(SCHEMA)
# Third-party backends, named on the command line as mymod:Class.
BACKENDS = HERE / "gost_test_backends.py"
# The smallest run of the shipped tables: network Ш (Sh), batch 1, inference.
SMALL = ("--gost-batch=1", "--gost-networks=Sh", "--gost-mode=inference")


# The sweeps CI leaves out (minutes on 2 cores): GOST_SWEEP=all runs every case.
SWEEP = os.environ.get("GOST_SWEEP") == "all"


def swept(*values, in_ci: bool = False):
    """A test case that runs by default only when ``in_ci``, and always under GOST_SWEEP=all
    (then it is marked ``slow``)."""
    if in_ci:
        return pytest.param(*values)
    marks = [pytest.mark.slow, pytest.mark.skipif(not SWEEP, reason="GOST_SWEEP=all")]
    return pytest.param(*values, marks=marks)


def read_report(path: Path) -> dict:
    """The ``--gost-report`` a run wrote, checked against its schema."""
    data = json.loads(path.read_text(encoding="utf-8"))
    SCHEMA_VALIDATOR.validate(data)
    return data


# Runs on six tiny official tables (a convolution, a ReLU, an FC layer each) with the full
# profile shrunk to 4 images per test (``-p gost_tiny_full``): a compliant run in seconds.
# Their threads' waiting for a core goes unmeasured, so that a busy machine does not make
# them "cell shared" (tests/test_contention.py runs the measure itself).

TINY_FULL = '''"""The full profile shrunk to 4 images per test, so a compliant run fits, and
the cell's sharing not measured, so that the machine's load decides nothing."""
from pytest_gostcnn.performance import contention, plan

plan.FULL_PROFILE_IMAGES = 4
contention.waited_seconds = lambda tasks="": None
'''
# The cell's sharing alone not measured (``-p gost_unshared``), for runs whose times are the
# fixed clock's and so never the machine's.
UNSHARED = '''"""The cell's sharing not measured: the machine's load decides nothing."""
from pytest_gostcnn.performance import contention

contention.waited_seconds = lambda tasks="": None
'''
TABLE = """letter: {letter}
name: tiny {letter}
provenance: {provenance}
input: {{X: 6, Y: 6, L: 2}}
layers:
  - {{n: 1, type: conv, F: 3, Rx: 3, Ry: 3, S: 1, Px: 1, Py: 1}}
  - {{n: 2, type: relu, in1: 1}}
  - {{n: 3, type: fc, in1: 2, F: 4}}
"""
TINY = ("--gost-tables=tiny", "--gost-profile=full", "--gost-batch=1", "-p", "gost_tiny_full")
# A clock that advances exactly 2**-7 s per reading, so every round of every run lasts that
# long and two runs compare figure for figure, times included.
CLOCK = '''"""A clock that advances 2**-7 s at every reading: every round lasts exactly that.

The warm-up times the copy of the weights by the machine's clock, not this one: with it,
a training check's unit is fixed at a segment, so that a run checks the same units each
time (tests/test_checks.py measures the unit in process)."""
from pytest_gostcnn.performance import rounds as _rounds

_rounds.unit_rounds = lambda *seconds_and_segment: seconds_and_segment[-1]
_now = 0.0


def tick():
    global _now
    _now += 2.0**-7
    return _now
'''
FIXED_CLOCK = "--benchmark-timer=gost_test_clock.tick"
UNMEASURED_SHARING = ("-p", "gost_unshared")


@dataclass
class Run:
    """What a run in a fresh interpreter left: its status, output, test reports and report."""

    returncode: int
    stdout: str
    stderr: str
    reports: list[dict]  # as tests/gost_test_recorder.py records them
    report: dict | None  # the --gost-report, checked against its schema
    path: Path  # where it ran: the tiny tables are in its folder tiny/

    @property
    def lines(self) -> list[str]:
        return [line for line in self.stdout.splitlines() if line.strip()]

    def longreprs(self, outcome: str) -> dict[str, str]:
        return {
            r["nodeid"].rpartition("::")[2]: r["longrepr"]
            for r in self.reports
            if r["outcome"] == outcome
        }


def directory(path: Path, provenance: str = "official") -> Path:
    """A run's directory: the tiny tables, the test backends as ``mymod``, the recorder,
    the shrunk full profile and the fixed clock, all importable there."""
    tables = path / "tiny"
    tables.mkdir(exist_ok=True)
    for cyrillic, latin in LATIN.items():
        text = TABLE.format(letter=cyrillic, provenance=provenance)
        (tables / f"{latin}.yaml").write_text(text, encoding="utf-8")
    for name, source in (
        ("mymod.py", BACKENDS),
        ("gost_test_recorder.py", HERE / "gost_test_recorder.py"),
    ):
        (path / name).write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    (path / "gost_tiny_full.py").write_text(TINY_FULL, encoding="utf-8")
    (path / "gost_unshared.py").write_text(UNSHARED, encoding="utf-8")
    (path / "gost_test_clock.py").write_text(CLOCK, encoding="utf-8")
    return path


def suite(path: Path, *args: str) -> Run:
    """``pytest ARGS --gost-report=...`` in ``path``, in a fresh interpreter."""
    record, report = path / ".record.json", path / "report.json"
    record.unlink(missing_ok=True)
    report.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": str(path), "GOST_TEST_RECORD": str(record)}
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p"]
    command += ["gost_test_recorder", *args, f"--gost-report={report}"]
    done = subprocess.run(command, cwd=path, env=env, capture_output=True, text=True, timeout=600)
    data = json.loads(report.read_text(encoding="utf-8")) if report.is_file() else None
    if data is not None:
        SCHEMA_VALIDATOR.validate(data)
    reports = json.loads(record.read_text(encoding="utf-8"))["reports"] if record.is_file() else []
    return Run(done.returncode, done.stdout, done.stderr, reports, data, path)


# Margins the verification tests hold every backend and every cheat to.

HALF = 0.5  # a correct backend's worst error stays within half its threshold (СКОП)
MARGIN = 10.0  # a cheat fails by at least ten times its threshold (СКОП)
# The smallest timing plan: three rounds, one of them a warm-up, at batch 1.
SMALL_PLAN = Plan("quick", rounds=3, warmup_rounds=1, batch=1)


class Scripted:
    """A check draw that checks exactly the units numbered in ``checked`` (from 1, in the
    order the test's units deliver; a resumed test's first is ``start`` + 1) and, in
    inference, image ``image`` of each: a test's, put in ``Rounds.draw``."""

    def __init__(self, checked, image=0, start=0):
        self.chosen = tuple(checked)
        self.unit = start
        self.past = []
        self.picture = image

    def decide(self):
        self.unit += 1
        if self.unit in self.chosen:
            self.past.append(self.unit)
        return self.unit in self.chosen

    def image(self, batch):
        return min(self.picture, batch - 1)


def run_rounds(rounds):
    """Every round of ``rounds`` (a ``Rounds``), the warm-up first, through the suite's loop
    (``loop.run``); ``rounds`` then, for a test here to read (the suite reads the record)."""
    record_of(run(rounds))
    return rounds


def usage_error(result: pytest.RunResult, *says: str) -> None:
    """The run ended with a usage error, without a traceback, whose message says each of
    ``says``, all on one line; pytest prints the message on stderr."""
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    output = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in output
    # One message, on one line: the plugin raised one UsageError, with no line break.
    lines = [line for line in result.stderr.lines if says[0] in line]
    assert len(lines) == 1, result.stderr.str()
    assert all(fragment in lines[0] for fragment in says), result.stderr.str()
