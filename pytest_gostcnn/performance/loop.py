"""Section 9: one test's loop, from its first warm-up round to its record.

``run`` is the suite's one loop of timed rounds. It sets each round up untimed, times the
round's target with the test's clock (the timed region, ``rounds.py``: the hand-over, the
call, ``synchronize()``, the delivery and, in training, the suite's copies), counts what the
cell's cores did while it ran (``contention.py``), and tears it down untimed (the delivery's
check, the draw, a drawn unit's check). The paired gate's two backends run through it side
by side, in pairs. The caller hears of the test between rounds, never inside one: progress
lines, each boundary where a checkpoint may be written, and last the test's record.
"""

from __future__ import annotations

import gc
import random
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from .partial import PartialCell, PartialTest
from .record import Pairs, Passed, Progress, Record
from .rounds import Rounds
from .stall import stall_deadline
from .timed_test import Links, TimedTest

Event = Progress | Passed | Record


@dataclass(frozen=True)
class Clock:
    """How a round is timed: by ``read``, with no tracer or profile hook of Python's running
    while it is timed, and its garbage collector kept from running when ``collector_off``
    (pytest-benchmark's ``--benchmark-timer`` and ``--benchmark-disable-gc``); ``profile``,
    a ``cProfile.Profile`` that one more round after the test runs under, neither timed nor
    checked (``--benchmark-cprofile``)."""

    read: Callable[[], float] = time.perf_counter
    collector_off: bool = False
    profile: Any = None

    def time(self, call: Callable, arguments: tuple) -> float:
        """The seconds ``call(*arguments)`` took, by ``read``."""
        collecting = gc.isenabled()
        tracer, profiler = sys.gettrace(), sys.getprofile()
        if self.collector_off:
            gc.disable()
        if tracer is not None:  # a coverage tracer, a debugger: not timed
            sys.settrace(None)
        if profiler is not None:
            sys.setprofile(None)
        try:
            started = self.read()
            call(*arguments)
            return self.read() - started
        finally:
            if tracer is not None:
                sys.settrace(tracer)
            if profiler is not None:
                sys.setprofile(profiler)
            if collecting:
                gc.enable()


def prepare(
    test: TimedTest, links: Links | None = None, resume: PartialCell | None = None
) -> Rounds:
    """``test``'s rounds, ready to run: its weights drawn and loaded (an integer type's
    calibrated first) and the backend's rate probed; ``resume``, this cell's share of the
    test a stopped run kept. Raises what the backend raised. With several cells, each then
    meets the others, its backend prepared or failed, so that a cell hung loading its
    weights ends the job rather than holding the others (docs/cells.md)."""
    try:
        return Rounds(test, links, resume)
    finally:
        if links is not None and links.meeting is not None:
            deadline = stall_deadline(links.stall_timeout, None)
            links.meeting.meet(deadline, "loading the weights")


def run(
    test: Rounds,
    clock: Clock = Clock(),
    baseline: Rounds | None = None,
    randomness: random.Random | None = None,
    checkpoints: bool = True,
) -> Iterator[Event]:
    """Every round of ``test``, its warm-up first, then its record. With a ``baseline`` (the
    paired gate), each of the baseline's rounds runs beside the test's on the same data key,
    the two in an order drawn per pair (``randomness``; the operating system's when None),
    each timed on its own. A boundary is passed with this cell's share only where
    ``checkpoints`` may be written (the same on every cell), never in a paired test."""
    order = random.SystemRandom() if randomness is None else randomness
    candidate_first: list[bool] = []
    pairs = 0
    for _ in range(test.plan.warmup_rounds + test.plan.rounds - test.start):
        test.begin()
        yield from map(Progress, test.progress.said())  # before the cells meet and the round runs
        turns = [(test, test.arguments())]
        first = True
        if baseline is not None:
            turns.append((baseline, baseline.setup(key=test.key or None)))
            first = order.random() < 0.5
            if not first:
                turns.reverse()
        timed = test.number >= 1
        for rounds, arguments in turns:
            if timed:
                rounds.meter.start()  # the last thing before the timed region
            seconds = clock.time(rounds.target, arguments)
            if timed:
                rounds.meter.stop()  # the first thing after it
                rounds.seconds.append(seconds)
        for rounds, _ in turns:
            rounds.teardown()
        yield from map(Progress, test.progress.said())
        if not timed:
            continue
        if baseline is not None:
            baseline.progress.said()  # the baseline's lines are the test's
            candidate_first.append(first)
            if test.error is None and baseline.error is None:
                pairs += 1  # a backend that failed runs no more rounds: nothing paired
        if checkpoints and baseline is None and test.at_boundary:
            share = _share(test) if test.error is None else None
            yield Passed(test.done, test.plan.rounds, _stopped_here(test), share)
        else:
            yield Passed(test.done, test.plan.rounds)
    test.end()
    yield from map(Progress, test.progress.said())
    paired = None
    if baseline is not None:
        paired = Pairs(
            tuple(baseline.seconds),
            tuple(candidate_first),
            pairs,
            baseline.error,
            next((check for check in baseline.checks if not check.passed), None),
            sum(baseline.seconds) + baseline.check_seconds,
        )
    record = _record(test, paired)  # before the profiled round, which changes nothing of it
    if clock.profile is not None:
        _profiled(test, clock.profile)
    yield record


def _profiled(test: Rounds, profile) -> None:
    """One more round after the test, under ``profile`` (``cProfile.Profile``): neither
    timed nor checked, and nothing of it kept."""
    if test.error is not None or test.check_failed:
        return
    try:
        arguments = test._arguments(test.plan.batch, 0, None)
    except Exception:  # noqa: BLE001 - a profile of no round: nothing to say
        return
    number, test.number = test.number, 0  # a round of no segment, unit or check
    try:
        profile.runcall(test.target, *arguments)
    finally:
        test.number, test.delivered, test.result = number, None, None


def _stopped_here(test: Rounds) -> PartialTest:
    """The test stopped at the boundary just passed, its cells' shares left out."""
    plan = test.plan
    return PartialTest(
        test.network.latin,
        test.mode,
        test.backend.dtype,
        plan.batch,
        plan.rounds,
        test.boundary_rounds,
        test.number,
        cells=(),
    )


def _share(test: Rounds) -> PartialCell:
    """This cell's share of the test at the boundary just passed (the stopped run's rounds,
    when resumed, first)."""
    seconds = (*test.earlier_seconds, *test.seconds)
    if len(seconds) != test.number:
        raise ValueError(f"{len(seconds)} round times after timed round {test.number}")
    return PartialCell(
        test.cell,
        test.device,
        seconds,
        test.first_image,
        tuple(test.checks),
        test.check_seconds,
        test.meter.contention(),
        tuple(test.fingerprints),
        test.unit_rounds if test.mode == "training" else None,
    )


def _record(test: Rounds, pairs: Pairs | None) -> Record:
    """The test as it ended on this cell (the stopped run's rounds, when resumed, first)."""
    return Record(
        cell=test.cell,
        device=test.device,
        peak=test.peak,
        images=test.plan.images,
        round_seconds=(*test.earlier_seconds, *test.seconds),
        resumed_rounds=len(test.earlier_seconds),
        first_image=test.first_image,
        checks=tuple(test.checks),
        check_seconds=test.check_seconds,
        checked_now=test.check_seconds - test.check_seconds_before,
        contention=test.meter.contention(),
        fingerprints=tuple(test.fingerprints),
        probe=test.probe,
        error=test.error,
        data_rules=_data_rules(test),
        pairs=pairs,
    )


def _data_rules(test: Rounds) -> dict:
    """What the report states of the benchmark's training data: the segment length, the
    output residual's scale, the unit and its copies' share (None for inference)."""
    training = test.mode == "training"
    return {
        "segment_rounds": test.segment_rounds if training else None,
        "residual_scale": test.residual_scale if training else None,
        "unit_rounds": test.unit_rounds if training else None,
        "copy_share": test.copy_share if training else None,
    }


def record_of(events: Iterator[Event]) -> Record:
    """The record a loop ends with, its other events let go (a test's rounds run alone)."""
    for event in events:
        if isinstance(event, Record):
            return event
    raise ValueError("the loop ended without its record")
