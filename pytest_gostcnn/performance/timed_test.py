"""What one test times on one cell, and how its rounds reach the rest of the session."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from pytest_gostcnn.backend import Backend
from pytest_gostcnn.model.fixed_point import ScaleTable
from pytest_gostcnn.model.network import Network
from pytest_gostcnn.reference.library import NUMPY, ReferenceLibrary

from .estimate import RunEstimate
from .plan import Plan


def subject(network: Network, mode: str) -> str:
    """The test in a progress line or a stall's: ``М (M) training``."""
    return f"{network.letter} ({network.latin}) {mode}"


# An integer type's calibration: (network, drawn weights, first images) -> (integer weights,
# scales); the plugin passes conformance.fixed_point's.
Calibrate = Callable[[Network, dict, np.ndarray], tuple[dict, ScaleTable]]


@dataclass(frozen=True)
class TimedTest:
    """What one test times on one cell: ``network`` in ``mode`` on ``backend``, the rounds of
    ``plan``, on the data of (``seed``, ``cell``).

    Args:
        segment_rounds: training's rounds per segment; None: ``training_data``'s for the
            backend's type.
        unit_rounds: training's rounds per checked unit (k); None: measured in the warm-up
            (``kept.unit_rounds``).
        calibrate: an integer type's (inference only): the integer weights and the scales,
            fixed from the drawn weights and a batch of the seed's.
        threshold: ``--gost-rmse-threshold`` for the checks (None: СКОП as derived).
        library: the array library the checks' float64 reference runs on.
        checked: whether rounds are checked (a unit test's rounds may run without).
    """

    backend: Backend
    network: Network
    mode: str
    plan: Plan
    seed: int
    cell: int = 0
    segment_rounds: int | None = None
    unit_rounds: int | None = None
    calibrate: Calibrate | None = None
    threshold: float | None = None
    library: ReferenceLibrary = NUMPY
    checked: bool = True


@dataclass(frozen=True)
class Links:
    """How one test's rounds reach the rest of the session; each may be left out (a unit
    test's rounds run alone).

    Args:
        progress: takes the progress lines (every 10 s, and the estimate's after the
            warm-up).
        barrier: ``barrier(deadline, where, word=None)``, with several cells: meets the
            others before each round, after each unit's delivery (the checks' draw) and
            after the last, giving up on a cell not there by ``deadline``
            (``stall_deadline``) and naming the round it was in (``where``); returns cell
            0's ``word()``, called once every cell arrived (the draw, one for all cells).
        randomness: the rounds' data keys' and the checks' draw's; None, the operating
            system's (unit tests give a seeded one).
        stall_timeout: ``--gost-stall-timeout``, every barrier's deadline.
        estimate: the whole run's, told when this test begins and when its warm-up ends.
        boundary: ``boundary(rounds)``, told in the teardown of each boundary's round
            (``partial.boundary_rounds``) but the test's last, untimed, that a checkpoint
            may be written (the plugin decides whether).
    """

    progress: Callable[[str], None] | None = None
    barrier: Callable[..., Any] | None = None
    randomness: random.Random | None = None
    stall_timeout: float | None = None
    estimate: RunEstimate | None = None
    boundary: Callable[[Any], None] | None = None
