"""The suite's own copies of a training unit's results, made inside its rounds' timed
regions (standard.md §7.7): every round's input residual, and at the unit's last round the
weights it ended with. A check replays the unit in float64 from the weights the backend
itself held before it, so the reference starts where the backend did and nothing drifts
between them.

The copies stay on the backend's device: through its arrays' own namespace (NumPy, CuPy,
PyTorch, by ``array_api_compat``) into buffers the suite allocates once, of the namespace's
own array type; an array of no known namespace is read to the host through the backend's
``to_host`` instead. A copy is read to the host only for a unit drawn for a check, through
the namespace, never the backend (``conformance/timed_check.py``): no call of the backend's tells
it which unit was checked.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
from array_api_compat import array_namespace, device

from pytest_gostcnn.backend import Backend

# The most of a unit's timed seconds the copies may take: every round's input residual,
# and one copy of the weights a unit of the fewest rounds that keep it within this share.
COPY_SHARE = 0.01

Weights = dict[int, dict[str, Any]]


def _copy(array: Any, into: Any, backend: Backend) -> Any:
    """``array`` copied on its device into ``into`` (its buffer from an earlier copy, or None:
    one allocated now), or to the host where it has no known namespace."""
    try:
        xp = array_namespace(array)
    except TypeError:  # not an array the suite can copy on the device: the host copy
        host = backend.to_host(array)
        return np.array(host, order="C") if isinstance(host, np.ndarray) else host
    if into is None:  # the namespace's own type: no subclass of the backend's sees the copy
        into = xp.empty(array.shape, dtype=array.dtype, device=device(array))
    into[...] = array
    return into


class KeptWeights:
    """The copies of one test: ``before``, the weights the unit now running started from
    (None: a segment's start, the drawn weights); ``after``, the weights the unit ended with,
    once its last round kept them; ``residuals``, each of its rounds' input residual. Their
    buffers are reused from unit to unit, so no round allocates after the warm-up."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.before: Weights | None = None
        self.after: Weights | None = None
        self.residuals: list[Any] = []
        self._free_weights: list[Weights] = []
        self._free_residuals: list[Any] = []

    def keep(self, weights: Weights, input_residual: Any, unit_end: bool) -> None:
        """In the timed region, after the round's output was delivered: copy its input
        residual and, at the unit's end, the weights, and wait for the copies (they are
        the round's, and timed with it)."""
        spare = self._free_residuals.pop() if self._free_residuals else None
        self.residuals.append(_copy(input_residual, spare, self.backend))
        if unit_end:
            into = self._free_weights.pop() if self._free_weights else None
            self.after = {
                n: {k: _copy(a, into and into[n][k], self.backend) for k, a in ws.items()}
                for n, ws in weights.items()
            }
        self.backend.synchronize()

    def next_unit(self, segment_ends: bool) -> None:
        """After a unit's draw: its ending weights start the next unit, or at a segment's
        end the drawn weights do; the copies no unit needs are free again."""
        free = [self.before, self.after] if segment_ends else [self.before]
        self._free_weights += [kept for kept in free if kept is not None]
        self._free_residuals += self.residuals
        self.before = None if segment_ends else self.after
        self.after, self.residuals = None, []

    def reserve(self, rounds: int) -> None:
        """Buffers for the input residuals of a unit of ``rounds``, allocated now (after the
        warm-up's copies), so that no timed round allocates one."""
        while 0 < len(self._free_residuals) < rounds:
            template = self._free_residuals[0]
            try:
                xp = array_namespace(template)
            except TypeError:  # host copies, made anew each round
                return
            self._free_residuals.append(
                xp.empty(template.shape, dtype=template.dtype, device=device(template))
            )

    def measure(self, weights: Weights, input_residual: Any) -> tuple[float, float]:
        """The seconds of one copy of the weights and of one input residual into buffers
        already allocated (the warm-up's: the first copies allocate them); the copies left
        free afterwards."""
        for _ in range(2):
            self.keep(weights, input_residual, unit_end=True)
            self.next_unit(segment_ends=False)
        started = time.perf_counter()
        self.keep(weights, input_residual, unit_end=False)
        residual = time.perf_counter() - started
        self.next_unit(segment_ends=False)
        started = time.perf_counter()
        self.keep(weights, input_residual, unit_end=True)
        both = time.perf_counter() - started
        self.next_unit(segment_ends=True)
        return max(0.0, both - residual), residual


def unit_rounds(
    weights_seconds: float, residual_seconds: float, round_seconds: float, segment_rounds: int
) -> int:
    """k: the fewest rounds that keep every round's input residual and one copy of the
    weights within ``COPY_SHARE`` of their time, at most a segment."""
    left = COPY_SHARE * round_seconds - residual_seconds  # a round's share left to the weights
    if weights_seconds <= 0:
        return 1
    if left <= 0:
        return segment_rounds
    return max(1, min(segment_rounds, math.ceil(weights_seconds / left)))


def copy_share(
    weights_seconds: float, residual_seconds: float, round_seconds: float, unit_rounds: int
) -> float:
    """The copies' share of a timed round: its input residual's and a k-th of the weights'."""
    return (weights_seconds / unit_rounds + residual_seconds) / round_seconds


def fixed_unit(mode: str, segment_rounds: int, given: int | None, warmup_rounds: int) -> int | None:
    """k where nothing is left to measure: inference's and a one-round segment's 1, the one
    ``given`` (the test's, or a stopped run's checkpoint's), a segment without a warm-up to
    measure in; None: the warm-up measures it."""
    if mode != "training" or segment_rounds == 1:
        return 1
    if given is None and warmup_rounds == 0:
        return segment_rounds
    return given
