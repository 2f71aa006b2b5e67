"""What one test times on one cell, and what its rounds share with the rest of the session."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from pytest_gostcnn.backend import Backend
from pytest_gostcnn.machine.peak import Peak
from pytest_gostcnn.model.network import Network
from pytest_gostcnn.reference.library import NUMPY, ReferenceLibrary

from .cells import Deadline
from .estimate import RunEstimate
from .plan import Plan


def subject(network: Network, mode: str) -> str:
    """The test in a progress line or a stall's: ``М (M) training``."""
    return f"{network.letter} ({network.latin}) {mode}"


@dataclass(frozen=True)
class TimedTest:
    """What one test times on one cell: ``network`` in ``mode`` on ``backend``, the rounds of
    ``plan``, on the data of (``seed``, ``cell``); ``device`` and ``peak``, the cell's, as
    the report names and states them.

    Args:
        segment_rounds: training's rounds per segment; None: ``training_data``'s for the
            backend's type.
        unit_rounds: training's rounds per checked unit (k); None: measured in the warm-up
            (``kept.unit_rounds``).
        threshold: ``--gost-rmse-threshold`` for the checks (None: СКОП as derived).
        library: the array library the checks' float64 reference runs on.
        checked: whether rounds are checked (the project's tests may run rounds without).
    """

    backend: Backend
    network: Network
    mode: str
    plan: Plan
    seed: int
    cell: int = 0
    device: str = ""
    peak: Peak | None = None
    segment_rounds: int | None = None
    unit_rounds: int | None = None
    threshold: float | None = None
    library: ReferenceLibrary = NUMPY
    checked: bool = True


class Meeting(Protocol):
    """Where the cells meet between a test's rounds, with several cells (the plugin's
    ``meeting.barrier`` over ``cells.Cells``)."""

    def meet(self, deadline: Deadline, where: str, word: Callable[[], Any] | None = None) -> Any:
        """Wait for every cell, giving up on one not there by ``deadline`` and naming the
        round it was in (``where``); return cell 0's ``word()``, called once every cell
        arrived (None without one): one draw for every cell."""


@dataclass(frozen=True)
class Links:
    """What one test's rounds share with the rest of the session; each may be left out (the
    project's tests run rounds alone).

    Args:
        meeting: with several cells, where they meet before each round, after each unit's
            delivery (the checks' draw, cell 0's word) and after the last.
        randomness: the rounds' data keys' and the checks' draw's; None, the operating
            system's (the project's tests give a seeded one).
        stall_timeout: ``--gost-stall-timeout``, every meeting's deadline.
        estimate: the whole run's, told when this test begins and when its warm-up ends.
    """

    meeting: Meeting | None = None
    randomness: random.Random | None = None
    stall_timeout: float | None = None
    estimate: RunEstimate | None = None
