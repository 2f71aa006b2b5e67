"""Section 8's verdicts: one compared array's СКО against its СКОП (``ArrayCheck``), the
outcome of one verification (``Verification``), and the rule that turns checks into a verdict
(standard.md §6).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

REFERENCE_GRADE = "reference-grade"
CORRECT = "correct"
NOT_CORRECT = "not correct"
NOT_VERIFIED = "not verified"  # the suite's own side failed: no verdict on the backend

#: Not verified correct: not correct, or not verified at all.
FAILED_VERDICTS = frozenset({NOT_CORRECT, NOT_VERIFIED})
#: Verified correct: reference-grade or correct.
PASSED_VERDICTS = frozenset({REFERENCE_GRADE, CORRECT})

#: What an ``ArrayCheck`` compares: СКО, or (an integer layer item's second check) the
#: magnitude of the mean error (standard.md §6, "Integer inference").
RMSE = "СКО"
MEAN_ERROR = "mean error"
#: A checked training unit's updated weights, against half their update (standard.md §6).
UPDATE_ERROR = "update error"


@dataclass
class ArrayCheck:
    """One compared array: its СКО against its СКОП, or the reason it could not be compared.
    A ``MEAN_ERROR`` check holds |mean error| in ``rmse`` and its bound in ``admissible``."""

    name: str
    rmse: float | None
    admissible: float
    problem: str | None = None
    reference_problem: bool = False  # the problem is the reference array's (untrustworthy)
    statistic: str = RMSE
    note: str | None = None  # what a failure of it means, where that is not plain

    @property
    def passed(self) -> bool:
        return (
            self.problem is None
            and self.rmse is not None
            and (self.rmse == 0 or self.rmse < self.admissible)
        )

    @property
    def ratio(self) -> float:
        """СКО / СКОП: below 1 passes; infinite when it could not be compared."""
        if self.problem is not None or self.rmse is None:
            return math.inf
        if self.rmse == 0:
            return 0.0
        return self.rmse / self.admissible if self.admissible > 0 else math.inf

    def as_dict(self) -> dict:
        return {
            "array": self.name,
            "rmse": self.rmse,
            "admissible_rmse": self.admissible,
            "ratio": None if math.isinf(self.ratio) else self.ratio,
            "problem": self.problem,
            **({"statistic": self.statistic} if self.statistic != RMSE else {}),
        }

    def describe(self) -> str:
        if self.problem is not None:
            return f"{self.name}: {self.problem}"
        bound = "СКОП" if self.statistic == RMSE else "admissible"
        # A bound of 0 (an exact result required) is missed by any error, by no finite factor.
        times = "any error misses 0" if math.isinf(self.ratio) else f"{self.ratio:.3g}x"
        return (
            f"{self.name}: {self.statistic} {self.rmse:.3e} vs {bound} {self.admissible:.3e} "
            f"({times})" + (f"; {self.note}" if self.note else "")
        )


@dataclass
class Verification:
    """The outcome of verifying one layer step or one network in one mode."""

    subject: str
    checks: list[ArrayCheck] = field(default_factory=list)
    error: str | None = None
    suite_failed: bool = False  # the error is the suite's own (SuiteError), not the backend's
    rows: tuple[str, ...] = ()  # a layer at a network's shape: the rows it stands for
    # An integer type's verification: every row's scales (fixed_point.scale_record).
    scales: dict[str, dict] | None = None

    @property
    def verdict(self) -> str:
        if self.error is None:
            return verdict(self.checks)
        return NOT_VERIFIED if self.suite_failed else NOT_CORRECT

    @property
    def failed(self) -> bool:
        """Not verified correct: not correct, or not verified at all."""
        return self.verdict in FAILED_VERDICTS

    @property
    def worst(self) -> ArrayCheck | None:
        return max(self.checks, key=lambda c: c.ratio, default=None)

    @property
    def first_failure(self) -> str | None:
        """The error, or the failed check that misses by most (an integer item's mean error
        at 9.5x says more than its СКО at 1.0x); in a network, the lowest row's failed array
        before it, where the mistake began (a wrong row 1 fails every row after it)."""
        if self.error is not None:
            return self.error
        failed = [c for c in self.checks if not c.passed]
        # A reference too degenerate to judge by is the suite's, not the backend's: last.
        worst = max(failed, key=lambda c: (not c.reference_problem, c.ratio), default=None)
        rows = [c for c in failed if _row(c.name) is not None and not c.reference_problem]
        first = min(rows, key=lambda c: _row(c.name), default=worst)
        if first is worst:
            return worst.describe() if worst else None
        return f"{first.describe()}, the first in row order; the worst: {worst.describe()}"

    def as_dict(self) -> dict:
        return {
            "subject": self.subject,
            "verdict": self.verdict,
            "error": self.error,
            **({"rows": list(self.rows)} if self.rows else {}),
            **({"scales": self.scales} if self.scales is not None else {}),
            "checks": [check.as_dict() for check in self.checks],
        }


def _row(name: str) -> int | None:
    """The network row a compared array belongs to ("row 54 filters gradient": 54)."""
    match = re.match(r"row (\d+) ", name)
    return int(match.group(1)) if match else None


def verdict(checks: Iterable[ArrayCheck]) -> str:
    """standard.md §6: reference-grade if every СКО is 0, correct if each is below its СКОП; not
    verified when the only failures are reference arrays too degenerate to judge by."""
    checks = list(checks)
    failed = [c for c in checks if not c.passed]
    if not checks or any(not c.reference_problem for c in failed):
        return NOT_CORRECT
    if failed:
        return NOT_VERIFIED
    return REFERENCE_GRADE if all(c.rmse == 0 for c in checks) else CORRECT
