"""Each test against a baseline report's, for a CI job to fail on a slowdown
(``python -m pytest_gostcnn compare`` and ``--gost-compare``; docs/report.md, "Comparing
with a baseline").

A test falls when its median round is slower than the baseline's by more than the allowed
percent, and significantly so: the lower end of a one-sided bootstrap confidence interval
(``CONFIDENCE``) of the ratio of the two median rounds lies above the allowed slowdown too.
The median, not the mean the ОРП divides by: one slow round moves a mean, not a median, and
a round's spread is what the interval measures. Identical round times are a ratio of 1, no
slowdown, so two identical reports never fall. A test whose cell other work shared in either
run (``performance/contention.py``) is not compared: its times are not the cell's own, and
they move from run to run by more than any interval of one run's rounds shows.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from pytest_gostcnn.performance.timing import Timing

from .load import configuration, differences

FELL = 6  # the exit status when a test fell: beyond pytest's own 0 to 5, so a CI job tells it
NOT_COMPARED = 7  # a run that would exit 0 but whose gate decided nothing for some test
# The backend's version is what a gate compares across (a new release against the last);
# everything else the results depend on must be the same (``load.configuration``).
ACROSS = ("backend_version",)
# The interval: one-sided at 95 %, from 2,000 resamples drawn with a fixed seed, so a
# comparison of two reports gives the same verdict every time it is made
# (docs/benchmarking.md, "Two gates measured", has its false alarms and catches).
CONFIDENCE = 0.95
RESAMPLES = 2000
SEED = 0


@dataclass(frozen=True)
class Change:
    """One test in the baseline and now: the ОРП of each (percent; None where it was not
    timed or has no peak); the median round's slowdown against the baseline's and the lower
    end of its confidence interval (percent; None where a run did not time it); the allowed
    slowdown (None: nothing falls); which runs timed it (``both``, ``baseline``, ``now``)."""

    test: str
    baseline: float | None
    now: float | None
    slowdown: float | None
    slowdown_at_least: float | None
    allowed: float | None
    timed_in: str = "both"
    shared_in: str | None = None  # the runs whose cell was shared: "the baseline", "this run"

    @property
    def change(self) -> float | None:
        """The ОРП's change against the baseline's, in percent of it."""
        if not self.baseline or self.now is None:
            return None
        return 100.0 * (self.now / self.baseline - 1.0)

    @property
    def fell(self) -> bool:
        """Slower than allowed, and significantly: both the slowdown and its interval's lower
        end above the allowed percent."""
        if self.allowed is None or self.slowdown is None or self.slowdown_at_least is None:
            return False
        if self.shared_in is not None:
            return False
        return self.slowdown > self.allowed and self.slowdown_at_least > self.allowed

    def describe(self) -> str:
        return (
            f"{self.test} median round {self.slowdown:+.1f} % "
            f"(at least {self.slowdown_at_least:+.1f} % at {CONFIDENCE:.0%})"
        )


@dataclass(frozen=True)
class Comparison:
    """Every test of the baseline or of the run now, in that order, and the allowed slowdown."""

    baseline: str  # the baseline report's path
    allowed: float | None
    changes: tuple[Change, ...]

    @property
    def fallen(self) -> list[Change]:
        return [change for change in self.changes if change.fell]

    def undecided(self) -> list[str]:
        """The tests timed now that the gate could not compare, each with why."""
        return [
            f"{c.test} (cell shared in {c.shared_in})" if c.shared_in else f"{c.test} (not in it)"
            for c in self.changes
            if c.timed_in == "now" or (c.timed_in == "both" and c.shared_in is not None)
        ]

    def reason(self) -> str | None:
        """Why the comparison fails, in one line; None when no test fell."""
        if not self.fallen:
            return None
        return (
            f"slower than the baseline {self.baseline} by more than {self.allowed:g} %, "
            f"significantly: {', '.join(c.describe() for c in self.fallen)}"
        )


def compare(
    baseline: str, then: Iterable[Timing], now: Iterable[Timing], allowed: float | None
) -> Comparison:
    """The tests of the baseline at ``baseline`` (``then``) against those timed ``now``."""
    earlier = {(t.latin, t.mode): t for t in then}
    later = {(t.latin, t.mode): t for t in now}
    changes = []
    for key in [*earlier, *(key for key in later if key not in earlier)]:
        a, b = earlier.get(key), later.get(key)
        slowdown = at_least = None
        if a is not None and b is not None:
            slowdown, at_least = median_slowdown(a.round_seconds, b.round_seconds)
        changes.append(
            Change(
                test=(a or b).name,
                baseline=a.orp if a else None,
                now=b.orp if b else None,
                slowdown=slowdown,
                slowdown_at_least=at_least,
                allowed=allowed,
                timed_in="both" if a and b else "baseline" if a else "now",
                shared_in=_shared_in(a, b),
            )
        )
    return Comparison(baseline, allowed, tuple(changes))


def _shared_in(then: Timing | None, now: Timing | None) -> str | None:
    runs = [word for word, t in (("the baseline", then), ("this run", now)) if t and t.shared_cells]
    return " and ".join(runs) or None


def median_slowdown(
    then: Sequence[float], now: Sequence[float], seed: int = SEED
) -> tuple[float, float]:
    """How much slower the median round of ``now`` is than that of ``then``, in percent, and
    the lower end of its one-sided ``CONFIDENCE`` bootstrap interval: each run's rounds
    resampled with replacement ``RESAMPLES`` times, the ratio of the medians taken each time."""
    a, b = np.asarray(then, dtype=float), np.asarray(now, dtype=float)
    slowdown = 100.0 * (np.median(b) / np.median(a) - 1.0)
    rng = np.random.default_rng(seed)
    medians_a = np.median(rng.choice(a, size=(RESAMPLES, a.size)), axis=1)
    medians_b = np.median(rng.choice(b, size=(RESAMPLES, b.size)), axis=1)
    ratios = np.sort(medians_b / medians_a)
    at_least = 100.0 * (ratios[int((1.0 - CONFIDENCE) * RESAMPLES)] - 1.0)
    return float(slowdown), float(at_least)


def configuration_differences(
    baseline: dict, now: dict, here: str = "here", there: str = "there"
) -> list[str]:
    """What differs between the configurations of a baseline's run and this one (both
    read by ``load.configuration``), less the backend's version, in words."""
    mine = {k: v for k, v in configuration(now).items() if k not in ACROSS}
    return differences(mine, configuration(baseline), here, there)
