"""Where the computing cells meet, in one place: every MPI collective the plugin makes (the
start-up's agreement, the items' shared failures and timings, the barrier of a test's rounds
and the check draw's word it carries, the words and gathers of the checkpoints and of the end).

Every cell must make the same collective calls in the same order or the job hangs: keeping
them here lets one read them all at once. What cell 0 does with what it gathered (the
report, the end of the run) is ``reporting.py``'s.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pytest_gostcnn.machine.facts import cpu_model
from pytest_gostcnn.performance.cells import Cells, Deadline
from pytest_gostcnn.performance.partial import PartialCell
from pytest_gostcnn.performance.timed_test import Meeting
from pytest_gostcnn.performance.timing import CellTiming
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


@dataclass(frozen=True)
class _Barrier:
    """The barrier of one test's rounds among the cells (``Meeting``)."""

    cells: Cells
    test: str
    stalled: Callable[[str], None]

    def meet(self, deadline: Deadline, where: str, word: Callable[[], Any] | None = None) -> Any:
        return self.cells.watched_barrier(deadline, f"{self.test}, {where}", self.stalled, word)


def barrier(cells: Cells, test: str, stalled: Callable[[str], None]) -> Meeting | None:
    """With several cells, the barrier of ``test``'s rounds: a cell that does not reach it
    in time ends the job through ``stalled``, named (docs/cells.md); ``word``, when given,
    is called on cell 0 once every cell arrived, and what it returns is every cell's (the
    check draw's decision after a round: one draw for all cells, after all delivered, so
    every cell checks the same rounds and none is taken for a stalled one). With one cell,
    none."""
    return None if cells.size == 1 else _Barrier(cells, test, stalled)


def cell_reports(
    resolved: Resolved, results: Results, status: int | None, reason: str | None
) -> list[dict] | None:
    """Every cell's facts, failures and exit status, on cell 0 (None on the others)."""
    return resolved.cells.gather(cell_report(resolved, results, status, reason))


def cell_report(
    resolved: Resolved, results: Results, status: int | None, reason: str | None
) -> dict:
    """This cell's facts, failures and exit status, as the report's ``cells`` hold them."""
    return {
        "cell": resolved.cells.rank,
        "host": resolved.cells.host,
        "cpu_model": cpu_model(),
        "device": resolved.device,
        "system": resolved.system,
        "peak": resolved.peak.macs_per_second if resolved.peak else None,
        "failures": results.outcomes.failures,
        "exit_status": None if status is None else int(status),
        "exit_reason": reason,
        "suite_seconds": results.suite_seconds.as_dict(),
    }


def checkpoint_agreed(cells: Cells, due: bool, failed: bool) -> bool:
    """Whether the cells write a checkpoint at a test's boundary: cell 0's clock says one
    is ``due`` (the word is the same for all) and no cell's backend has ``failed``."""
    words = cells.allgather((due, failed))
    return words[0][0] and not any(failed for _, failed in words)


def shares_on_root(cells: Cells, own: PartialCell | None) -> list[PartialCell] | None:
    """Every cell's share of a test stopped at a boundary, on cell 0 (None on the others)."""
    return cells.gather(own)


def leave_together(cells: Cells) -> None:
    """Wait for every cell (after cell 0 wrote a checkpoint: a long write is no stall)."""
    cells.allgather(None)
