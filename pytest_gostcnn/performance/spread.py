"""How a test's timed rounds spread: the median round, the slowest and the mean, which the
ОРП divides by, and whether slow rounds moved the result (docs/benchmarking.md, "Noise")."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

# The ОРП divides by the mean round, the median is a typical round's: a mean more than this
# above the median, which quiet runs stay below, says slow rounds lowered the ОРП by about
# that much (docs/benchmarking.md, "Noise", has the runs).
NOISY_MEAN_ABOVE_MEDIAN = 0.10


@dataclass(frozen=True)
class Spread:
    """How a test's timed rounds spread: the median round, the slowest, and the mean, which
    the ОРП uses (the time over the rounds)."""

    median_seconds: float
    slowest_seconds: float
    mean_seconds: float

    @classmethod
    def of(cls, round_seconds: Sequence[float]) -> Spread:
        return cls(
            statistics.median(round_seconds),
            max(round_seconds),
            sum(round_seconds) / len(round_seconds),
        )

    @property
    def slowest_to_median(self) -> float:
        return self.slowest_seconds / self.median_seconds

    @property
    def mean_above_median(self) -> float:
        """The mean round's excess over the median round, as a share of the median."""
        return self.mean_seconds / self.median_seconds - 1.0

    @property
    def noisy(self) -> bool:
        """Slow rounds moved the result: the mean lies more than ``NOISY_MEAN_ABOVE_MEDIAN``
        above the median."""
        return self.mean_seconds > self.median_seconds * (1.0 + NOISY_MEAN_ABOVE_MEDIAN)

    @property
    def orp_lowered(self) -> float:
        """How much lower the ОРП is than at the median round's rate, as a share of that."""
        return 1.0 - self.median_seconds / self.mean_seconds

    def as_dict(self) -> dict:
        return {
            "median_round_seconds": self.median_seconds,
            "slowest_round_seconds": self.slowest_seconds,
            "slowest_to_median": self.slowest_to_median,
            "mean_above_median": self.mean_above_median,
            "noisy": self.noisy,
        }
