"""Where the computing cells meet, in one place: every MPI collective the plugin makes (the
start-up's agreement, the items' shared failures and timings, the barrier of a test's
rounds, the gathers of the checkpoints and of the end), and the report written from what
cell 0 gathered, after each performance test and at the end.

Every cell must make the same collective calls in the same order or the job hangs: keeping
them here lets one read them all at once.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Callable

import pytest

from pytest_gostcnn.machine.facts import cpu_model
from pytest_gostcnn.performance.cells import Cells, Deadline
from pytest_gostcnn.performance.partial import CheckpointClock, PartialCell, PartialTest
from pytest_gostcnn.performance.timing import CellTiming
from pytest_gostcnn.run import outcome, report
from pytest_gostcnn.run.options import Options
from pytest_gostcnn.run.resolution import Resolved
from pytest_gostcnn.run.results import Results


def errors_on_cells(cells: Cells, error: str | None) -> list[tuple[int, str]]:
    """Every cell's error (or reason), those that have one, by cell; every cell calls it."""
    return [(cell, why) for cell, why in enumerate(cells.allgather(error)) if why]


def failures_on_cells(cells: Cells, failure: str | None) -> list[tuple[int, str]]:
    """Every cell's failure, those that are not None, by cell; every cell calls it."""
    return [(cell, why) for cell, why in enumerate(cells.allgather(failure)) if why is not None]


def timings_on_cells(cells: Cells, own: CellTiming) -> tuple[CellTiming, ...]:
    """Every cell's timing of one test, by cell; every cell calls it."""
    return tuple(cells.allgather(own))


def audit_draw(cells: Cells) -> random.Random:
    """The draw of a test's audited rounds, the same on every cell: cell 0's seed from the
    operating system, which no backend sees. Every cell then audits the same rounds, so a
    cell that audits is not taken for a stalled one by the others (``Rounds.deadline``)."""
    return random.Random(cells.allgather(random.SystemRandom().getrandbits(128))[0])


def barrier(
    cells: Cells, test: str, stalled: Callable[[str], None]
) -> Callable[[Deadline, str], None] | None:
    """With several cells, the barrier of ``test``'s rounds: a cell that does not reach it
    in time ends the job through ``stalled``, named (docs/cells.md). With one cell, none."""
    if cells.size == 1:
        return None
    return lambda deadline, where: cells.watched_barrier(deadline, f"{test}, {where}", stalled)


def finish(
    pytest_session: pytest.Session,
    exitstatus: int,
    options: Options,
    resolved: Resolved,
    results: Results,
) -> None:
    """Gather every cell's facts, failures and exit status on cell 0, judge the results
    there, set the system's exit status and write the report."""
    # A checkpoint that could not be written stopped the run (pytest calls it interrupted).
    stopped = results.report_failure or outcome.stop_reason(
        int(exitstatus), pytest_session.shouldstop, pytest_session.shouldfail
    )
    status, reason = outcome.exit_status(int(exitstatus), stopped, options, resolved, results)
    pytest_session.exitstatus = status
    gathered = _gather(resolved, results, status, reason)
    if not resolved.cells.is_root:
        return
    results.cell_reports = gathered
    statuses = [(c["exit_status"], c["exit_reason"]) for c in gathered]
    state = outcome.run_state(options, results, stopped)
    conclusion, whole = report.conclude(options, resolved, results, statuses, state)
    results.conclusion = conclusion
    results.stopped = stopped
    pytest_session.exitstatus = conclusion.exitstatus
    if options.report is None or results.report_failure is not None:
        return  # after a failed checkpoint the file keeps what its last write put there
    why = _write(pytest_session.config, options.report, whole)
    if why is not None:
        pytest_session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
        results.conclusion = dataclasses.replace(
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
    fails sets ``results.report_failure`` on every cell (they gather again), for the run
    to stop at once.

    With ``stopped`` (a cell stalled, cell 0 alone can act) nothing is gathered: the
    cells' facts are those of the last checkpoint.
    """
    if options.report is None or results.report_failure is not None:
        return
    if stopped is None:
        gathered = _gather(resolved, results, None, None)
        why = None
        if resolved.cells.is_root:
            results.cell_reports = gathered
            why = _write_so_far(config, options, resolved, results, None)
        failed = errors_on_cells(resolved.cells, why)
        if failed:
            results.report_failure = failed[0][1]
        return
    if not resolved.cells.is_root:
        return
    if not results.cell_reports:
        results.cell_reports = [_cell_report(resolved, results, None, None)]
    _write_so_far(config, options, resolved, results, stopped)


def _write_so_far(
    config: pytest.Config,
    options: Options,
    resolved: Resolved,
    results: Results,
    stopped: str | None,
) -> str | None:
    """Write the report of the run so far on cell 0; why it could not be, else None."""
    statuses = [(0, None)] * len(results.cell_reports)
    state = outcome.run_state(options, results, stopped, ended=False)
    _, whole = report.conclude(options, resolved, results, statuses, state, ended=False)
    why = _write(config, options.report, whole)
    if why is None:
        results.report_kept = list(state["finished"])
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
    when a checkpoint is due by cell 0's clock (the word is the same for all) and no cell's
    backend has failed (``own`` None: nothing to go on from), every cell's share of
    ``test`` is gathered on cell 0 and the report written with the test so far. The cells
    then leave together, so a long write does not look like a stalled cell."""
    if options.report is None:
        return
    cells = resolved.cells
    words = cells.allgather((clock.due(), own is None))
    if not words[0][0] or any(failed for _, failed in words):
        return
    started = time.monotonic()
    shares = cells.gather(own)
    if cells.is_root:
        results.partial = dataclasses.replace(test, cells=tuple(shares))
    write_checkpoint(config, options, resolved, results)
    cells.allgather(None)
    clock.wrote(time.monotonic() - started)


def _cell_report(
    resolved: Resolved, results: Results, status: int | None, reason: str | None
) -> dict:
    return {
        "cell": resolved.cells.rank,
        "host": resolved.cells.host,
        "cpu_model": cpu_model(),
        "device": resolved.device,
        "system": resolved.system,
        "peak": resolved.peak.macs_per_second if resolved.peak else None,
        "failures": results.failures,
        "exit_status": None if status is None else int(status),
        "exit_reason": reason,
    }


def _gather(
    resolved: Resolved, results: Results, status: int | None, reason: str | None
) -> list[dict] | None:
    """Every cell's facts on cell 0 (a collective call: every cell makes it)."""
    return resolved.cells.gather(_cell_report(resolved, results, status, reason))


def _write(config: pytest.Config, path: str, whole: dict) -> str | None:
    """Write the report atomically; why it could not be written, else None."""
    try:
        report.write_report(path, whole)
    except (OSError, ValueError, TypeError) as exc:  # Value/TypeError: not JSON
        why = f"could not write --gost-report={path}: {exc}"
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"gostcnn: {why}", red=True)
        return why
    return None
