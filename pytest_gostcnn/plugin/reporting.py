"""The report written from what cell 0 gathered (``meeting.py``): after each performance test
and at a test's boundaries (checkpoints, so a run killed later keeps its work), and at the
end of the run, where the run is concluded (``run/report.py``: judged on the one road) and
the system's exit status set.
"""

from __future__ import annotations

import dataclasses
import time

import pytest

from pytest_gostcnn.performance.partial import CheckpointClock, PartialCell, PartialTest
from pytest_gostcnn.run import outcome, report
from pytest_gostcnn.run.options import Options
from pytest_gostcnn.run.resolution import Resolved
from pytest_gostcnn.run.results import Results

from . import meeting


def finish(
    pytest_session: pytest.Session,
    exitstatus: int,
    options: Options,
    resolved: Resolved,
    results: Results,
) -> None:
    """Gather every cell's facts, failures and exit status on cell 0, conclude the run there
    (its results judged, the system's exit status) and write the report."""
    # A checkpoint that could not be written stopped the run (pytest calls it interrupted).
    stopped = results.reported.failure or outcome.stop_reason(
        int(exitstatus), pytest_session.shouldstop, pytest_session.shouldfail
    )
    status, reason = outcome.exit_status(int(exitstatus), stopped, options, resolved, results)
    pytest_session.exitstatus = status
    gathered = meeting.cell_reports(resolved, results, status, reason)
    if not resolved.cells.is_root:
        return
    results.reported.cell_reports = gathered
    statuses = [(c["exit_status"], c["exit_reason"]) for c in gathered]
    state = outcome.run_state(options, results, stopped)
    conclusion, whole = report.conclude(options, resolved, results, statuses, state)
    results.reported.conclusion = conclusion
    results.reported.stopped = stopped
    pytest_session.exitstatus = conclusion.exitstatus
    if options.report is None or results.reported.failure is not None:
        return  # after a failed checkpoint the file keeps what its last write put there
    reporter = _reporter(pytest_session.config)
    why = report.report_written(options.report, whole)
    if why is not None:
        if reporter is not None:
            reporter.write_line(f"gostcnn: {why}", red=True)
        pytest_session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
        results.reported.conclusion = dataclasses.replace(
            conclusion, exitstatus=pytest_session.exitstatus, exit_reason=why
        )


def write_checkpoint(
    config: pytest.Config,
    options: Options,
    resolved: Resolved,
    results: Results,
    stopped: str | None = None,
) -> None:
    """The report so far, after every performance test (on every cell: they gather),
    so that a run killed later keeps its finished tests; marked incomplete. A write that
    fails sets ``results.reported.failure`` on every cell (they gather again), for the run
    to stop at once.

    With ``stopped`` (a cell stalled, cell 0 alone can act) nothing is gathered: the
    cells' facts are those of the last checkpoint.
    """
    if options.report is None or results.reported.failure is not None:
        return
    started = time.monotonic()
    try:
        _checkpoint(config, options, resolved, results, stopped)
    finally:
        results.suite_seconds.add("checkpoints", time.monotonic() - started)


def _checkpoint(
    config: pytest.Config,
    options: Options,
    resolved: Resolved,
    results: Results,
    stopped: str | None,
) -> None:
    """The cells' facts gathered (``stopped``: the last checkpoint's, or cell 0's alone),
    the report written on cell 0 and, unless ``stopped``, its failure told every cell."""
    root = resolved.cells.is_root
    if stopped is None:
        gathered = meeting.cell_reports(resolved, results, None, None)
        if root:
            results.reported.cell_reports = gathered
    elif not root:
        return
    elif not results.reported.cell_reports:
        results.reported.cell_reports = [meeting.cell_report(resolved, results, None, None)]
    why = _write_so_far(config, options, resolved, results, stopped) if root else None
    if stopped is None:
        failed = meeting.errors_on_cells(resolved.cells, why)
        if failed:
            results.reported.failure = failed[0][1]


def _write_so_far(
    config: pytest.Config,
    options: Options,
    resolved: Resolved,
    results: Results,
    stopped: str | None,
) -> str | None:
    """Write the report of the run so far on cell 0; why it could not be, else None."""
    reporter = _reporter(config)
    statuses = [(0, None)] * len(results.reported.cell_reports)
    state = outcome.run_state(options, results, stopped, ended=False)
    _, whole = report.conclude(options, resolved, results, statuses, state, ended=False)
    why = report.report_written(options.report, whole)
    if why is None:
        results.reported.kept = list(state["finished"])
    elif reporter is not None:
        reporter.write_line(f"gostcnn: {why}", red=True)
    return why


def write_boundary(
    config: pytest.Config,
    options: Options,
    resolved: Resolved,
    results: Results,
    clock: CheckpointClock,
    test: PartialTest,
    own: PartialCell | None,
) -> None:
    """At a boundary of a performance test, in its untimed teardown (every cell calls it):
    when a checkpoint is due by cell 0's clock and no cell's backend has failed (``own``
    None: nothing to go on from), every cell's share of ``test`` is gathered on cell 0 and
    the report written with the test so far. The cells then leave together, so a long
    write does not look like a stalled cell."""
    if options.report is None:
        return
    cells = resolved.cells
    if not meeting.checkpoint_agreed(cells, clock.due(), own is None):
        return
    started = time.monotonic()
    shares = meeting.shares_on_root(cells, own)
    if cells.is_root:
        results.reported.partial = dataclasses.replace(test, cells=tuple(shares))
        results.reported.moved_on = True
    write_checkpoint(config, options, resolved, results)
    meeting.leave_together(cells)
    clock.wrote(time.monotonic() - started)


def checkpoints_spent(results: Results) -> None:
    """A performance test went to its end: no test is kept at a boundary any more."""
    results.reported.partial, results.reported.moved_on = None, True


def _reporter(config: pytest.Config):
    """pytest's terminal reporter, which says a report could not be written (None when
    pytest runs without one)."""
    return config.pluginmanager.get_plugin("terminalreporter")
