"""The suite's own copy of a training unit's ending weights and input residual, made inside
its last round's timed region (standard.md §7.7): a check replays the unit in float64 from
the weights the backend itself held before it, so the reference starts where the backend
did and nothing drifts between them.

The copy stays on the backend's device: through its arrays' own namespace (NumPy, CuPy,
PyTorch, by ``array_api_compat``) into buffers the suite allocates once; an array of no known
namespace is read to the host through the backend's ``to_host`` instead. A copy is read to
the host only for a unit drawn for a check, through the namespace, never the backend: no
call of the backend's tells it which unit was checked.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from array_api_compat import array_namespace

from pytest_gostcnn.backend import Backend
from pytest_gostcnn.reference.library import to_numpy

# The most of a unit's timed seconds the copy may take: a unit is the fewest rounds that
# keep one copy within it (standard.md §7.7).
COPY_SHARE = 0.01


@dataclass
class Kept:
    """One copy: each weight array by (row, name), and the input residual."""

    weights: dict[int, dict[str, Any]]
    input_residual: Any


def _copy(array: Any, into: Any, backend: Backend) -> Any:
    """``array`` copied on its device into ``into`` (its buffer from an earlier copy, or None:
    one allocated now), or to the host where it has no known namespace."""
    try:
        xp = array_namespace(array)
    except TypeError:  # not an array the suite can copy on the device: the host copy
        host = backend.to_host(array)
        return np.array(host, order="C") if isinstance(host, np.ndarray) else host
    if into is None:
        into = xp.empty_like(array)
    into[...] = array
    return into


class KeptWeights:
    """The copies of one test: ``before``, the weights the unit now running started from
    (None: a segment's start, the drawn weights), and ``after``, the weights and input
    residual the unit ended with, once its last round kept them. Two buffers at most, reused
    from unit to unit, so no round allocates after the warm-up."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.before: Kept | None = None
        self.after: Kept | None = None
        self._free: list[Kept] = []

    def keep(self, weights: dict, input_residual: Any) -> None:
        """In the timed region, after the round's ``synchronize()``: copy the weights and
        the input residual, and wait for the copy (it is the round's, and timed with it)."""
        into = self._free.pop() if self._free else None
        self.after = Kept(
            {
                n: {k: _copy(a, into and into.weights[n][k], self.backend) for k, a in ws.items()}
                for n, ws in weights.items()
            },
            _copy(input_residual, into and into.input_residual, self.backend),
        )
        self.backend.synchronize()

    def next_unit(self, segment_ends: bool) -> None:
        """After a unit's draw: its ending weights start the next unit, or at a segment's
        end the drawn weights do; the copy no unit needs is free again."""
        free = [self.before, self.after] if segment_ends else [self.before]
        self._free += [kept for kept in free if kept is not None]
        self.before = None if segment_ends else self.after
        self.after = None

    def measure(self, weights: dict, input_residual: Any) -> float:
        """The seconds of one copy into buffers already allocated (the warm-up's: the first
        two copies allocate them); the copies left free afterwards."""
        for _ in range(2):
            self.keep(weights, input_residual)
            self.next_unit(segment_ends=False)
        started = time.perf_counter()
        self.keep(weights, input_residual)
        seconds = time.perf_counter() - started
        self.next_unit(segment_ends=True)
        return seconds


def on_host(kept: Kept) -> tuple[dict[int, dict[str, np.ndarray]], np.ndarray]:
    """A copy's weights and input residual on the host (for a check, after its draw)."""
    weights = {n: {k: _host(a) for k, a in ws.items()} for n, ws in kept.weights.items()}
    return weights, _host(kept.input_residual)


def _host(array: Any) -> Any:
    try:
        array_namespace(array)
    except TypeError:  # already the host copy ``to_host`` gave
        return array
    return to_numpy(array)


def unit_rounds(copy_seconds: float, round_seconds: float, segment_rounds: int) -> int:
    """k: the fewest rounds whose time one copy stays within ``COPY_SHARE`` of, at most a
    segment."""
    if copy_seconds <= 0 or round_seconds <= 0:
        return 1 if copy_seconds <= 0 else segment_rounds
    return max(1, min(segment_rounds, math.ceil(copy_seconds / (COPY_SHARE * round_seconds))))


def fixed_unit(mode: str, segment_rounds: int, given: int | None, warmup_rounds: int) -> int | None:
    """k where nothing is left to measure: inference's and a one-round segment's 1, the one
    ``given`` (the test's, or a stopped run's checkpoint's), a segment without a warm-up to
    measure in; None: the warm-up measures it."""
    if mode != "training" or segment_rounds == 1:
        return 1
    if given is None and warmup_rounds == 0:
        return segment_rounds
    return given
