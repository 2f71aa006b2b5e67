"""Section 9: what one test's loop tells its caller, between rounds, and the record it ends
with (``loop.py``)."""

from __future__ import annotations

from dataclasses import dataclass

from pytest_gostcnn.machine.peak import Peak

from .contention import Contention
from .partial import PartialCell, PartialTest
from .probe import Probe
from .timing import CellTiming, Check


@dataclass(frozen=True)
class Progress:
    """A progress line: every 10 s, and the run's estimate once the warm-up ended."""

    line: str


@dataclass(frozen=True)
class Passed:
    """A timed round ended and was torn down: ``done`` of the test's ``rounds`` timed rounds
    have ended (a resumed test's counted). At a boundary (``partial.boundary_rounds``) but
    the test's last, ``boundary`` is the test stopped there, its cells left out: a
    checkpoint of it may be written now, with ``share``, this cell's share of it (None when
    its backend failed: nothing to go on from)."""

    done: int
    rounds: int
    boundary: PartialTest | None = None
    share: PartialCell | None = None


@dataclass(frozen=True)
class Pairs:
    """The paired gate's rounds beside the test's: the baseline's seconds of each timed
    round, in pair order beside the candidate's (``Record.seconds_now``), whether the
    candidate ran first in each, and how many of the first are pairs (both backends' rounds
    run; none from the round one of them failed in)."""

    baseline_seconds: tuple[float, ...]
    candidate_first: tuple[bool, ...]
    pairs: int
    baseline_error: str | None
    baseline_failed: Check | None  # the baseline's first failed check
    baseline_work: float  # the baseline's timed seconds and its checks'


@dataclass(frozen=True)
class Record:
    """One test on one cell (``device``, timing ``images``), as its loop ended.

    ``round_seconds``: every timed round's, the stopped run's first when resumed
    (``resumed_rounds`` of them); ``check_seconds``: every check's, ``checked_now`` this
    run's; ``error``: the backend's first failure (its later rounds idle); ``data_rules``:
    what the report states of training's data (``Rounds.data_rules``); ``pairs``: the
    paired gate's, when the test ran beside a baseline."""

    cell: int
    device: str
    peak: Peak | None
    images: int
    round_seconds: tuple[float, ...]
    resumed_rounds: int
    first_image: str
    checks: tuple[Check, ...]
    check_seconds: float
    checked_now: float
    contention: Contention | None
    fingerprints: tuple[str | None, ...]
    probe: Probe | None
    error: str | None
    data_rules: dict
    pairs: Pairs | None = None

    @property
    def seconds_now(self) -> tuple[float, ...]:
        """This run's timed rounds' seconds."""
        return self.round_seconds[self.resumed_rounds :]

    @property
    def cell_timing(self) -> CellTiming:
        """This cell's measurement of the test, with its peak, as the report keeps it."""
        return CellTiming(
            cell=self.cell,
            device=self.device,
            images=self.images,
            round_seconds=self.round_seconds,
            peak=self.peak,
            first_image=self.first_image,
            checks=self.checks,
            check_seconds=self.check_seconds,
            contention=self.contention,
            fingerprints=self.fingerprints,
            probe=self.probe,
        )
