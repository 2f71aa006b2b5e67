"""Each test's ОРП against a baseline report's, for a CI job to fail on a drop
(``python -m pytest_gostcnn compare`` and ``--gost-compare``; docs/report.md, "Comparing
with a baseline").

A test falls when its ОРП lies more than the allowed percent below the baseline's, beyond
the spread the two runs measured: the larger of their mean rounds' excess over the median
round (slow rounds lower an ОРП by about that much, ``performance/timing.py``'s ``Spread``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pytest_gostcnn.performance.timing import Timing

from .load import configuration, differences

FELL = 6  # the exit status when a test fell: beyond pytest's own 0 to 5, so a CI job tells it
# The backend's version is what a gate compares across (a new release against the last);
# everything else the results depend on must be the same (``load.configuration``).
ACROSS = ("backend_version",)


@dataclass(frozen=True)
class Change:
    """One test's ОРП in the baseline and now (percent; None where it was not timed or has
    no peak), each run's spread (percent) and the allowed drop (None: nothing falls)."""

    test: str
    baseline: float | None
    now: float | None
    baseline_spread: float | None
    now_spread: float | None
    allowed: float | None

    @property
    def change(self) -> float | None:
        """The ОРП's change against the baseline's, in percent of it."""
        if not self.baseline or self.now is None:
            return None
        return 100.0 * (self.now / self.baseline - 1.0)

    @property
    def limit(self) -> float | None:
        """The change below which the test falls: the allowed drop, widened by the spread."""
        if self.allowed is None or self.baseline_spread is None or self.now_spread is None:
            return None
        return -(self.allowed + max(self.baseline_spread, self.now_spread))

    @property
    def fell(self) -> bool:
        change, limit = self.change, self.limit
        return change is not None and limit is not None and change < limit


@dataclass(frozen=True)
class Comparison:
    """Every test of the baseline or of the run now, in that order, and the allowed drop."""

    baseline: str  # the baseline report's path
    allowed: float | None
    changes: tuple[Change, ...]

    @property
    def fallen(self) -> list[Change]:
        return [change for change in self.changes if change.fell]

    def reason(self) -> str | None:
        """Why the comparison fails, in one line; None when no test fell."""
        if not self.fallen:
            return None
        tests = ", ".join(
            f"{c.test} {c.change:+.1f} % (limit {c.limit:.1f} %)" for c in self.fallen
        )
        return (
            f"ОРП fell more than {self.allowed:g} % below the baseline {self.baseline}, "
            f"beyond the measured spread: {tests}"
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
        changes.append(
            Change(
                test=(a or b).name,
                baseline=a.orp if a else None,
                now=b.orp if b else None,
                baseline_spread=_spread(a),
                now_spread=_spread(b),
                allowed=allowed,
            )
        )
    return Comparison(baseline, allowed, tuple(changes))


def _spread(timing: Timing | None) -> float | None:
    return None if timing is None else 100.0 * timing.spread.mean_above_median


def configuration_differences(
    baseline: dict, now: dict, here: str = "here", there: str = "there"
) -> list[str]:
    """What differs between the configurations of a baseline's run and this one (both
    read by ``load.configuration``), less the backend's version, in words."""
    mine = {k: v for k, v in configuration(now).items() if k not in ACROSS}
    return differences(mine, configuration(baseline), here, there)
