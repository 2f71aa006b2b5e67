"""Section 9: a performance test stopped part-way, as a checkpoint keeps it, and how often
one is written (docs/benchmarking.md, "Checkpoints inside a test").

A long test is checkpointed at its **boundaries**: in training the end of a segment (the
next round loads the drawn weights again, so nothing but the round's number is needed to
go on), in inference every ``INFERENCE_BOUNDARY_ROUNDS`` rounds (each round is a fresh
batch on weights that never change, so any round would do; a fixed period keeps the
decision off most rounds). A boundary's state is the timed rounds' seconds so far, the
checks done so far, the first image's checksum and the cell's contention counts so far
(``contention.py``), per cell; everything else (the images,
the residuals, the weights) is made again from (seed, cell, round).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from pytest_gostcnn.model.network import CYRILLIC

from .contention import Contention
from .designations import benchmark_name
from .timing import Check

INFERENCE_BOUNDARY_ROUNDS = 16
# A checkpoint inside a test is written at a boundary once at least CHECKPOINT_SECONDS have
# passed since the test began or since the last one, and at least 1 / CHECKPOINT_SHARE times
# the last one's writing time: writing costs at most that share of the run (a full report
# is large and slow to write; docs/report.md), and a kill loses at most that time and one
# boundary's rounds.
CHECKPOINT_SECONDS = 300.0
CHECKPOINT_SHARE = 0.01


def boundary_rounds(mode: str, segment_rounds: int) -> int:
    """The rounds between two boundaries of a test: a training segment's, or inference's
    fixed period."""
    return segment_rounds if mode == "training" else INFERENCE_BOUNDARY_ROUNDS


@dataclass(frozen=True)
class PartialCell:
    """One cell's share of a test stopped at a boundary: its timed rounds so far."""

    cell: int
    device: str
    round_seconds: tuple[float, ...]
    first_image: str  # the first timed image's checksum, as CellTiming has it
    checks: tuple[Check, ...] = ()
    check_seconds: float = 0.0
    # What the cell's cores did in those rounds, which the resumed test goes on counting;
    # None in a checkpoint that predates it.
    contention: Contention | None = None
    # Each timed round's output fingerprint (None: none delivered); () in a checkpoint
    # that predates them.
    fingerprints: tuple[str | None, ...] = ()
    # Training's k, which the resumed test keeps; None for inference, or in a checkpoint
    # that predates units of rounds.
    unit_rounds: int | None = None

    def check_place(self, rounds: int, boundary: int) -> None:
        """Raise ValueError unless this share stopped at a boundary (every ``boundary``
        rounds) before the test's ``rounds`` ended, its checks all among its rounds."""
        start = len(self.round_seconds)
        if start % boundary or start >= rounds:
            raise ValueError(
                f"resumed after timed round {start} of {rounds}: not a boundary "
                f"(every {boundary} rounds) before the test's end"
            )
        if any(check.last_round > start for check in self.checks):
            raise ValueError(
                f"resumed after timed round {start}: checks of rounds "
                f"{[check.subject for check in self.checks]} are not all among them"
            )

    def as_dict(self) -> dict:
        return {
            "cell": self.cell,
            "device": self.device,
            "round_seconds": list(self.round_seconds),
            "fingerprints": list(self.fingerprints),
            "seconds": sum(self.round_seconds),
            "first_image_crc32": self.first_image,
            "checks": [check.as_dict() for check in self.checks],
            "check_seconds": self.check_seconds,
            "contention": self.contention.as_dict() if self.contention else None,
            "unit_rounds": self.unit_rounds,
        }

    @classmethod
    def from_dict(cls, data: dict) -> PartialCell:
        return cls(
            cell=data["cell"],
            device=data["device"],
            round_seconds=tuple(data["round_seconds"]),
            first_image=data["first_image_crc32"],
            checks=tuple(Check.from_dict(a) for a in data["checks"]),
            check_seconds=data["check_seconds"],
            contention=Contention.from_dict(data["contention"]) if data.get("contention") else None,
            fingerprints=tuple(data.get("fingerprints", ())),
            unit_rounds=data.get("unit_rounds"),
        )


# What a report states of a partial test, in the order of ``PartialTest``'s fields.
_STATED = ("network", "mode", "dtype", "batch", "rounds", "boundary_rounds", "timed_rounds_done")


@dataclass(frozen=True)
class PartialTest:
    """A performance test stopped after ``done`` of its ``rounds`` timed rounds, at a
    boundary (every ``boundary`` rounds): not a result, a place to go on from."""

    latin: str
    mode: str
    dtype: str
    batch: int
    rounds: int
    boundary: int
    done: int
    cells: tuple[PartialCell, ...]

    @property
    def name(self) -> str:
        return benchmark_name(self.latin, self.mode, self.dtype, self.batch)

    @property
    def key(self) -> tuple[str, str]:
        return self.latin, self.mode

    def as_dict(self) -> dict:
        return {
            "test": self.name,
            "network": self.latin,
            "letter": CYRILLIC[self.latin],
            "mode": self.mode,
            "dtype": self.dtype,
            "batch": self.batch,
            "rounds": self.rounds,
            "boundary_rounds": self.boundary,
            "timed_rounds_done": self.done,
            "cells": [cell.as_dict() for cell in self.cells],
        }

    @classmethod
    def from_dict(cls, data: dict) -> PartialTest:
        cells = tuple(PartialCell.from_dict(c) for c in data["cells"])
        return cls(*(data[key] for key in _STATED), cells=cells)


class CheckpointClock:
    """Whether a boundary's checkpoint is due: ``CHECKPOINT_SECONDS`` since the last (or
    since the clock began) and ``1 / CHECKPOINT_SHARE`` times the last one's writing time."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._last = clock()
        self._cost = 0.0

    def due(self) -> bool:
        wait = max(CHECKPOINT_SECONDS, self._cost / CHECKPOINT_SHARE)
        return self._clock() - self._last >= wait

    def wrote(self, seconds: float) -> None:
        """A checkpoint was written, in ``seconds``."""
        self._last = self._clock()
        self._cost = seconds
