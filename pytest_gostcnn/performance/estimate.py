"""Section 9: how long a run's benchmark tests take, estimated before the first timed round
and refined as they run (docs/benchmarking.md, "Estimate and progress").

A test's time is its rounds' (their untimed setup included, its checks not): measured
once it ended; before that, its MACs (per image, times the images of all its rounds) at a
rate: its own warm-up round's once it has one, else the rate of the tests that finished
(their MACs over their time) or, before any has, the latest warm-up's. The six networks
reach rates several times apart on one machine, so every line names what it rests on.

Its checks (the suite's float64 work, apart from its time) are measured once it ended;
before that, their work (the float64 iterations a draw of its checked rounds runs, times
its MACs per iteration) at the rate the finished tests' checks ran or, before any has,
the rate of section 8's verification of the networks, the same float64 iterations.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass

from pytest_gostcnn.machine.peak import si

from .checks import Units

# A refined total is printed at a test's start when it moved by more than this share from
# the last one printed: the guess is no finer than that (the networks' rates differ by
# several times), so smaller moves would only add lines.
REFINED_BY = 0.10


@dataclass
class _Test:
    label: str  # "М (M) training"
    macs: int  # all its rounds', warm-up included
    began: float | None = None  # the clock when its first round was set up
    rate: float | None = None  # MAC/s of its warm-up rounds
    seconds: float | None = None  # its rounds' measured time, once it ended
    dropped: bool = False  # skipped or failed before its first round: not counted
    check_work: float = 0.0  # MACs of the float64 iterations its checks are expected to run
    check_seconds: float | None = None  # its checks' measured time, once it ended


class RunEstimate:
    """The time of a run's benchmark tests, given in run order as (key, label, MACs), from
    the clock's readings at each test's ``began``, ``warmed_up`` and ``finished``."""

    def __init__(
        self,
        tests: Iterable[tuple[Hashable, str, int]],
        clock: Callable[[], float] = time.monotonic,
        check_work: Mapping[Hashable, float] | None = None,
    ) -> None:
        """``check_work``: each test's expected check work (``_Test.check_work``)."""
        work = check_work or {}
        self._tests = {
            key: _Test(label, macs, check_work=work.get(key, 0.0)) for key, label, macs in tests
        }
        self._clock = clock
        self._said: float | None = None  # the total the last printed line gave
        self._verified: list[tuple[float, float]] = []  # (seconds, MACs) of section 8's

    def began(self, key: Hashable) -> None:
        """The test's first round is being set up. A test before it that never began was
        skipped or failed before its rounds: it leaves the estimate."""
        for other, test in self._tests.items():
            if other == key:
                break
            if test.began is None:
                test.dropped = True
        self._tests[key].began = self._clock()

    def warmed_up(self, key: Hashable, macs: int) -> str | None:
        """The test's warm-up rounds, ``macs`` in all, ended: its own rate replaces the
        guess. The line to print: the run's first total, or one that moved by more than
        ``REFINED_BY`` since the last printed; otherwise None."""
        test = self._tests[key]
        seconds = self._clock() - test.began
        if macs <= 0 or seconds <= 0:
            return None
        test.rate = macs / seconds
        total = self.total_seconds()
        first = self._said is None
        if not first and abs(total - self._said) <= REFINED_BY * self._said:
            return None
        self._said = total
        if first:
            return f"run estimate: {self._total(total)} ({self._sources()}){self._checks()}"
        left = duration(self._left() + self._checks_left())
        in_all = " in all" if self._check_rate() is not None else ""
        return (
            f"run estimate refined: {self._total(total)} ({self._sources()}){self._checks()}; "
            f"about {left} left{in_all}"
        )

    def finished(self, key: Hashable, check_seconds: float = 0.0) -> None:
        """The test's rounds ended: their measured time, less its checks' ``check_seconds``,
        replaces the estimate, and so do its checks'."""
        test = self._tests[key]
        if test.began is None:
            test.dropped = True
        else:
            test.seconds = self._clock() - test.began - check_seconds
            test.check_seconds = check_seconds

    def verified(self, seconds: float, macs: float) -> None:
        """Section 8 verified a network in ``seconds``: one float64 iteration of ``macs``
        (its MACs per image, times the batch), with its error model, as a check runs."""
        if seconds > 0 and macs > 0:
            self._verified.append((seconds, macs))

    def check_seconds(self) -> float | None:
        """All counted tests' checks: measured, or their work at the check rate; None
        before any rate is known."""
        rate = self._check_rate()
        if rate is None:
            return None
        return sum(self._check(test, rate) for test in self._counted)

    def total_seconds(self) -> float | None:
        """All counted tests' time: measured, from their own warm-up, or guessed; None
        before any test has a rate."""
        basis = self._basis()
        if basis is None:
            return None
        return sum(self._seconds(test, basis[0]) for test in self._counted)

    def status(self, key: Hashable, fraction: float) -> str:
        """The run's progress while test ``key`` has done ``fraction`` of its images:
        which test, the share of the estimated time done, and the time left."""
        counted = self._counted
        test = self._tests[key]
        where = f"run: test {counted.index(test) + 1} of {len(counted)}"
        basis = self._basis()
        if basis is None:
            return where
        elapsed = self._clock() - test.began
        if fraction > 0:
            current_left = elapsed * (1 - fraction) / fraction
        else:
            current_left = max(0.0, self._seconds(test, basis[0]) - elapsed)
        pending = [t for t in counted if t.began is None]
        left = current_left + sum(self._seconds(t, basis[0]) for t in pending)
        left += self._checks_left()
        done = elapsed + sum(t.seconds + t.check_seconds for t in counted if t.seconds is not None)
        share = 100 * done / (done + left) if done + left > 0 else 100.0
        line = f"{where}, {share:.1f} % of the estimated time, about {duration(left)} left"
        if pending:
            line += f" ({len(pending)} {_tests(len(pending))} estimated from {basis[1]})"
        return line

    @property
    def _counted(self) -> list[_Test]:
        return [test for test in self._tests.values() if not test.dropped]

    def _basis(self) -> tuple[float, str] | None:
        """The rate of a test without its own, and what it rests on."""
        finished = [t for t in self._counted if t.seconds is not None and t.seconds > 0]
        if finished:
            rate = sum(t.macs for t in finished) / sum(t.seconds for t in finished)
            if len(finished) == 1:
                return rate, f"{finished[0].label}'s measured rate, {si(rate)}MAC/s"
            return rate, f"the {len(finished)} finished tests' rate, {si(rate)}MAC/s"
        warmed = [t for t in self._counted if t.rate]
        if warmed:
            return warmed[-1].rate, f"{warmed[-1].label}'s warm-up, {si(warmed[-1].rate)}MAC/s"
        return None

    @staticmethod
    def _seconds(test: _Test, rate: float) -> float:
        if test.seconds is not None:
            return test.seconds
        return test.macs / (test.rate or rate)

    def _left(self) -> float:
        """The time of the tests not finished, less what the running one has had."""
        rate = self._basis()[0]
        now = self._clock()
        return sum(
            max(0.0, self._seconds(t, rate) - (0.0 if t.began is None else now - t.began))
            for t in self._counted
            if t.seconds is None
        )

    def _check_rate(self) -> float | None:
        """Seconds per MAC of check work: the finished tests' checks', else section 8's."""
        finished = [t for t in self._counted if t.check_seconds is not None and t.check_work]
        if finished:
            return sum(t.check_seconds for t in finished) / sum(t.check_work for t in finished)
        if self._verified:
            return sum(s for s, _ in self._verified) / sum(m for _, m in self._verified)
        return None

    @staticmethod
    def _check(test: _Test, rate: float) -> float:
        return test.check_seconds if test.check_seconds is not None else test.check_work * rate

    def _checks_left(self) -> float:
        """The checks of the tests not finished (0 before any check rate is known)."""
        rate = self._check_rate()
        if rate is None:
            return 0.0
        return sum(t.check_work * rate for t in self._counted if t.seconds is None)

    def _checks(self) -> str:
        """The checks' part of a line: their time and what it rests on, or that it is not
        known yet."""
        total = self.check_seconds()
        if total is None:
            return "; their checks not counted until a test's are measured"
        finished = any(t.check_seconds is not None and t.check_work for t in self._counted)
        basis = "the finished tests' checks" if finished else "section 8's float64 iterations"
        return f"; and about {duration(total)} for their checks (at the rate of {basis})"

    def _total(self, total: float) -> str:
        count = len(self._counted)
        return f"about {duration(total)} for the rounds of {count} benchmark {_tests(count)}"

    def _sources(self) -> str:
        """What each test's part of the total rests on."""
        counted = self._counted
        measured = sum(t.seconds is not None for t in counted)
        own = sum(t.seconds is None and t.rate is not None for t in counted)
        guessed = len(counted) - measured - own
        parts = [f"{measured} measured"] if measured else []
        if own:
            parts.append(f"{own} from {'its' if own == 1 else 'their'} own warm-up")
        if guessed:
            parts.append(f"{guessed} estimated from {self._basis()[1]}")
        return ", ".join(parts)


def check_iterations(mode: str, rounds: int, segment_rounds: int | None, batch: int) -> float:
    """The float64 iterations (each of a whole batch) a test of ``rounds`` timed rounds runs
    for its checks, on average over the draw (``checks.py``): in inference one image a
    checked round, 1 / ``batch`` of an iteration; in training every round of a checked unit
    once, the unit taken as one round (its length is measured in the test's warm-up; at the
    batches where it is longer, each round's check is short)."""
    training = mode == "training"
    chance = Units(mode, rounds, segment_rounds, 1 if training else None).chance
    if training:
        return chance * rounds
    return chance * rounds / batch


def progress_line(subject: str, done: int, total: int, kept: int, seconds: float) -> str:
    """A test's progress: ``done`` of its ``total`` images set up (the warm-up's included, and
    ``kept``, a resumed test's earlier ones), the rate of this run's over ``seconds`` of its
    rounds, and the time its rounds have left at that rate."""
    rate = (done - kept) / seconds if seconds > 0 else 0.0
    left = (total - done) / rate if rate > 0 else math.inf
    return (
        f"{subject}: {done}/{total} images ({100 * done / total:.1f}%, the warm-up's "
        f"included), {rate:.3g} images/s in its rounds, about {duration(left)} of rounds left"
    )


def _tests(count: int) -> str:
    return "test" if count == 1 else "tests"


def duration(seconds: float) -> str:
    """A time left, in the unit a person reads it in."""
    if not math.isfinite(seconds):
        return "unknown time"
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
