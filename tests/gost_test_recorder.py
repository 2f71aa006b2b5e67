"""What a pytest run in a fresh interpreter collected and reported, as data, not as text.

An in-process run hands its test reports back in a ``HookRecorder``; a run in a subprocess
has only its terminal text. This module is both ends of the bridge: loaded into that run
with ``-p gost_test_recorder``, its hooks write the collected items and every test report
(outcome, longrepr) to the JSON file ``$GOST_TEST_RECORD`` names; ``as_user`` runs pytest so
and reads the file back as a ``Recorded``. Not a test file (the name does not start with
``test_``); the tests copy it into the run's directory, as a user's own plugin would lie.

``in_process`` gives the same ``Recorded`` of a run in this process, for runs that only
collect or check options (quicker: no interpreter to start).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_gostcnn.performance import contention

PLUGIN = "gost_test_recorder"
RECORD = "GOST_TEST_RECORD"

# The plugin's side, in the run: one process, one run.

_items: list[str] = []
_reports: list[dict] = []
_internal_errors: list[str] = []


def pytest_configure(config: pytest.Config) -> None:
    # The suite's runs inside the project's tests leave the cell's sharing unmeasured, so
    # that the tests' own load (the next test, another pytest-xdist worker) never makes a
    # run "cell shared". tests/test_contention.py measures it for real; a run's own plugin
    # that stands in for the measure (tests/test_reports.py's shared cell) is kept.
    if contention.waited_seconds.__module__ == contention.__name__:
        contention.waited_seconds = _unmeasured


def _unmeasured(tasks: str = "") -> None:
    return None


def pytest_collection_finish(session: pytest.Session) -> None:
    _items[:] = [item.nodeid for item in session.items]


def _as_record(report: pytest.TestReport | pytest.CollectReport) -> dict:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple):  # a skip: (path, line number, reason)
        longrepr = longrepr[2]
    return {
        "nodeid": report.nodeid,
        "when": report.when,
        "outcome": report.outcome,
        "longrepr": None if longrepr is None else str(longrepr),
    }


def _record(report: pytest.TestReport | pytest.CollectReport) -> None:
    _reports.append(_as_record(report))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _record(report)


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if not report.passed:
        _record(report)


def pytest_internalerror(excrepr) -> None:
    _internal_errors.append(str(excrepr))


def pytest_unconfigure(config: pytest.Config) -> None:
    path = os.environ.get(RECORD)
    if path:
        record = {"items": _items, "reports": _reports, "internal_errors": _internal_errors}
        Path(path).write_text(json.dumps(record), encoding="utf-8")


# The tests' side.


def outcomes(reports: list[dict]) -> dict[str, int]:
    """How many tests of these recorded reports passed, failed and were skipped, counted as
    ``HookRecorder.listoutcomes`` counts them; outcomes that no test had are left out."""
    counts = Counter(
        report["outcome"]
        for report in reports
        if report["outcome"] != "passed" or report["when"] == "call"
    )
    return dict(counts)


@dataclass
class Recorded:
    """One run: its exit code and output, what it collected and what its tests reported."""

    result: pytest.RunResult
    items: list[str]  # node ids, in collection order (after -k and -m)
    reports: list[dict]  # nodeid, when, outcome, longrepr (a skip's: its reason)
    internal_errors: list[str]

    @property
    def ret(self) -> int:
        return self.result.ret

    def ids(self, function: str) -> list[str]:
        """The parameter ids of ``function``'s collected items."""
        names = [nodeid.rpartition("::")[2] for nodeid in self.items]
        prefix = f"{function}["
        return [name[len(prefix) : -1] for name in names if name.startswith(prefix)]

    def outcomes(self) -> dict[str, int]:
        """How many tests passed, failed and were skipped (``outcomes``)."""
        return outcomes(self.reports)

    def longreprs(self, outcome: str) -> dict[str, str]:
        """The longrepr of each test with ``outcome`` (a failure's message, a skip's reason),
        by the name of its item (``test_network[Sh-inference-B1]``)."""
        return {
            report["nodeid"].rpartition("::")[2]: report["longrepr"]
            for report in self.reports
            if report["outcome"] == outcome
        }


@contextmanager
def recording(pytester: pytest.Pytester) -> Iterator[Path]:
    """Within it, a pytest run given ``-p gost_test_recorder`` records to the file yielded."""
    (pytester.path / f"{PLUGIN}.py").write_text(
        Path(__file__).read_text(encoding="utf-8"), encoding="utf-8"
    )
    record = pytester.path / f".{PLUGIN}.json"
    record.unlink(missing_ok=True)
    with pytest.MonkeyPatch.context() as env:
        env.setenv(RECORD, str(record))
        env.setenv(
            "PYTHONPATH",
            os.pathsep.join(filter(None, [str(pytester.path), os.environ.get("PYTHONPATH")])),
        )
        yield record


def read(record: Path, result: pytest.RunResult) -> Recorded:
    """What the run that ended with ``result`` recorded in ``record``."""
    assert record.is_file(), (
        f"the run recorded nothing\n{result.stdout.str()}\n{result.stderr.str()}"
    )
    data = json.loads(record.read_text(encoding="utf-8"))
    return Recorded(result, data["items"], data["reports"], data["internal_errors"])


def as_user(pytester: pytest.Pytester, *args: str) -> Recorded:
    """``pytest ARGS`` in a fresh interpreter, its plugins found through entry points as in a
    user's run, and what it collected and reported."""
    with recording(pytester) as record:
        result = pytester.runpytest_subprocess("-p", PLUGIN, *args)
    return read(record, result)


class _InProcess:
    """This module's hooks as a plugin object, for one run in this process."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self.reports: list[dict] = []
        self.internal_errors: list[str] = []

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.items = [item.nodeid for item in session.items]

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.reports.append(_as_record(report))

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if not report.passed:
            self.reports.append(_as_record(report))

    def pytest_internalerror(self, excrepr) -> None:
        self.internal_errors.append(str(excrepr))


def in_process(pytester: pytest.Pytester, *args: str) -> Recorded:
    """``pytest ARGS`` in this process, its plugins found through the same entry points, and
    what it collected and reported, as ``as_user`` gives a fresh interpreter's. For runs that
    only collect or check options: nothing the run loads may patch the package's modules,
    which this process keeps."""
    recorder = _InProcess()
    result = pytester.runpytest_inprocess(*args, plugins=[recorder])
    return Recorded(result, recorder.items, recorder.reports, recorder.internal_errors)
