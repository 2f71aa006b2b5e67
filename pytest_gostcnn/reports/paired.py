"""The paired gate's statistics (``--gost-versus``; docs/benchmarking.md, "The paired gate").

The candidate and the baseline backend time their rounds in pairs, side by side, so what
the machine does to one round it does to the other. A pair's statistic is the log of the
ratio of its two round times, candidate over baseline; a test's is the centre of those
logs, tested with Wilcoxon's signed-rank test against the allowed slowdown
(``--gost-compare-fail``): the candidate falls only when the centre is above
log(1 + allowed) and significantly so. The centre is the Hodges-Lehmann estimate (the
median of the pairs' Walsh averages) and its confidence interval the Walsh averages' order
statistics at the signed-rank test's critical values, so the interval and the test agree.

Across the run's tests, Holm's step-down bounds the chance of any false alarm by
``LEVEL``. A test's verdict is given when it ends and never changes: Holm's step-down over
the run's ``tests`` with the tests not yet timed counted as not significant (p = 1), which
rejects only what Holm over all of them would reject too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

LEVEL = 0.05  # the chance that a run of a backend against itself fails any test
CONFIDENCE = 0.95  # the two-sided interval the summary prints
EXACT_PAIRS = 60  # up to this many pairs the signed-rank distribution is counted exactly


def noise_limit(allowed: float) -> float:
    """The largest detectable slowdown (percent) at which a test that did not fall still
    counts as compared: half as much again as the allowed, and at least 2.5 points above it.
    At the detectable slowdown a run falls about half the time; one twice as far above the
    allowed, about 95 % of the time, so a test compared would have caught a slowdown of
    twice the allowed (5 points more, at least) with about that chance."""
    return max(1.5 * allowed, allowed + 2.5)


@lru_cache(maxsize=64)
def _sum_counts(doubled_ranks: tuple[int, ...]) -> np.ndarray:
    """How many of the sign assignments of these ranks (doubled, so that tied ranks'
    averages are whole numbers) give each doubled positive-rank sum."""
    counts = np.zeros(sum(doubled_ranks) + 1)
    counts[0] = 1.0
    for rank in doubled_ranks:
        counts[rank:] = counts[rank:] + counts[: counts.size - rank].copy()
    return counts


def _untied(n: int) -> tuple[int, ...]:
    """Ranks 1..n, doubled."""
    return tuple(range(2, 2 * n + 1, 2))


def _exact_upper_tail(doubled_ranks: tuple[int, ...], w: float) -> float:
    """P(W+ >= w) over every sign assignment of these ranks (doubled)."""
    counts = _sum_counts(doubled_ranks)
    return float(counts[int(round(2 * w)) :].sum() / counts.sum())


def _upper_tail(ranks: np.ndarray, w: float, tie_term: float) -> float:
    """P(W+ >= w) for the nonzero differences' ``ranks`` with no true shift: counted
    exactly up to ``EXACT_PAIRS``, else the normal approximation with the ties' term."""
    n = ranks.size
    if n == 0:
        return 1.0
    if n <= EXACT_PAIRS:
        return _exact_upper_tail(tuple(int(r) for r in np.rint(2 * ranks)), w)
    mean = n * (n + 1) / 4
    variance = n * (n + 1) * (2 * n + 1) / 24 - tie_term / 48
    if variance <= 0:
        return 1.0
    z = (w - mean - 0.5) / math.sqrt(variance)  # continuity-corrected
    return 0.5 * math.erfc(z / math.sqrt(2))


def _ranks(values: np.ndarray) -> tuple[np.ndarray, float]:
    """Average ranks (1..n) of ``values``, and sum(t^3 - t) over their ties."""
    order = np.argsort(values, kind="stable")
    ranks = np.empty(values.size)
    sorted_values = values[order]
    start, tie_term = 0, 0.0
    while start < values.size:
        end = start
        while end + 1 < values.size and sorted_values[end + 1] == sorted_values[start]:
            end += 1
        ranks[order[start : end + 1]] = (start + end) / 2 + 1
        t = end - start + 1
        tie_term += t**3 - t
        start = end + 1
    return ranks, tie_term


def signed_rank_p(differences: Sequence[float], centre: float) -> float:
    """One-sided p of Wilcoxon's signed-rank test that ``differences`` centre above
    ``centre`` (the differences equal to it left out, as the test does)."""
    d = np.asarray(differences, dtype=float) - centre
    d = d[d != 0]
    if d.size == 0:
        return 1.0
    ranks, tie_term = _ranks(np.abs(d))
    return _upper_tail(ranks, float(ranks[d > 0].sum()), tie_term)


def _critical(n: int, tail: float) -> int:
    """The largest k with P(W+ <= k - 1) <= tail: the Walsh averages' order statistic that
    bounds the centre (the k-th smallest, from 1; 0 when no bound is that sure)."""
    if n <= EXACT_PAIRS:
        counts = _sum_counts(_untied(n))[::2]  # whole sums only
        cumulative = np.cumsum(counts) / counts.sum()
        return int(np.searchsorted(cumulative, tail, side="right"))
    mean = n * (n + 1) / 4
    sd = math.sqrt(n * (n + 1) * (2 * n + 1) / 24)
    z = -math.sqrt(2) * _erfc_inverse(2 * tail)
    return max(0, int(math.floor(mean + z * sd)))


def _erfc_inverse(y: float) -> float:
    """x with erfc(x) = y, 0 < y < 2, by bisection (the interval needs no more)."""
    low, high = -10.0, 10.0
    for _ in range(100):
        middle = (low + high) / 2
        if math.erfc(middle) > y:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def _walsh(d: np.ndarray) -> np.ndarray:
    """The pairs' Walsh averages (d_i + d_j) / 2, i <= j, sorted."""
    i, j = np.triu_indices(d.size)
    return np.sort((d[i] + d[j]) / 2)


def interval(walsh: np.ndarray, n: int, tail: float) -> tuple[float, float]:
    """The centre's confidence bounds, each one-sided at (1 - tail), from the sorted Walsh
    averages of n pairs; infinite where n pairs cannot bound it that surely."""
    k = _critical(n, tail)
    if k == 0:
        return -math.inf, math.inf
    return float(walsh[k - 1]), float(walsh[walsh.size - k])


def lower_bound(walsh: np.ndarray, n: int, tail: float) -> float:
    """The one-sided lower confidence bound (1 - tail) of the centre."""
    return interval(walsh, n, tail)[0]


@dataclass(frozen=True)
class Paired:
    """One test's pairs judged: the candidate's time over the baseline's, in percent, as
    the pairs' centre and its two-sided ``CONFIDENCE`` interval; p of the slowdown being
    above ``allowed``; and the smallest slowdown the run's noise let it detect at the
    strictest level Holm may apply (``level_floor``); inf: too few pairs for any."""

    test: str
    pairs: int
    candidate_first: int  # pairs whose candidate round ran first
    slowdown: float
    low: float
    high: float
    p: float
    detectable: float
    allowed: float | None

    @property
    def too_noisy(self) -> bool:
        return self.allowed is not None and self.detectable > noise_limit(self.allowed)

    def describe(self) -> str:
        """``+12.3 % (95 % interval +10.1 to +14.0 %, 40 pairs, p 0.0001)``."""
        return (
            f"{self.slowdown:+.1f} % ({CONFIDENCE:.0%} interval {self.low:+.1f} to "
            f"{self.high:+.1f} %, {self.pairs} pairs, p {self.p:.2g})"
        )

    def as_dict(self) -> dict:
        return {
            "test": self.test,
            "pairs": self.pairs,
            "candidate_first": self.candidate_first,
            "slowdown": self.slowdown,
            "low": _finite(self.low),
            "high": _finite(self.high),
            "p": self.p,
            "detectable": _finite(self.detectable),
            "allowed": self.allowed,
        }


def paired(
    test: str,
    candidate: Sequence[float],
    baseline: Sequence[float],
    candidate_first: Sequence[bool],
    allowed: float | None,
    level_floor: float,
) -> Paired:
    """The pairs of one test judged: ``candidate[i]`` and ``baseline[i]`` the two rounds of
    pair i (seconds); ``level_floor``: the smallest level Holm may test it at (LEVEL over
    the run's tests)."""
    a, b = np.asarray(candidate, dtype=float), np.asarray(baseline, dtype=float)
    if a.size != b.size or a.size == 0 or (a <= 0).any() or (b <= 0).any():
        raise ValueError(f"{test}: {a.size} and {b.size} round times, not pairs of positive ones")
    d = np.log(a / b)
    walsh = _walsh(d)
    centre = float(np.median(walsh))
    low, high = interval(walsh, d.size, (1 - CONFIDENCE) / 2)
    threshold = math.log1p((allowed or 0.0) / 100)
    p = signed_rank_p(d, threshold)
    # Shifted to a true slowdown s, the lower bound moves with it: s is detected when
    # bound - centre + log(1 + s) > threshold.
    bound = lower_bound(walsh, d.size, level_floor)
    detectable = math.inf if math.isinf(bound) else _percent(threshold + centre - bound)
    return Paired(
        test,
        int(d.size),
        int(sum(bool(x) for x in candidate_first)),
        _percent(centre),
        _percent(low),
        _percent(high),
        p,
        detectable,
        allowed,
    )


def _finite(value: float) -> float | None:
    """``value`` in the report: None where it is unbounded (JSON has no infinity)."""
    return None if math.isinf(value) else value


def _percent(log_ratio: float) -> float:
    if math.isinf(log_ratio):
        return log_ratio * 100.0
    return 100.0 * math.expm1(log_ratio)


def holm_rejects(p_values: Sequence[float], tests: int, level: float = LEVEL) -> list[bool]:
    """Which of ``p_values`` Holm's step-down rejects among ``tests`` tests at ``level``,
    the tests not given counted as p = 1 (not yet timed)."""
    if tests < len(p_values):
        raise ValueError(f"{len(p_values)} p-values of {tests} tests")
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    rejected = [False] * len(p_values)
    for step, i in enumerate(order):
        if p_values[i] > level / (tests - step):
            break
        rejected[i] = True
    return rejected


@dataclass(frozen=True)
class Verdict:
    """A test's verdict against the baseline backend: ``fell`` (slower than allowed,
    significantly after Holm), or ``not_compared`` saying why the gate decided nothing;
    neither: compared, and not slower than allowed. ``paired``: the pairs judged (None when
    none were timed); the pairs' round seconds, candidate's and baseline's, and which ran
    first, kept for the report."""

    test: str
    paired: Paired | None
    fell: bool = False
    not_compared: str | None = None
    candidate_seconds: tuple[float, ...] = ()
    baseline_seconds: tuple[float, ...] = ()
    candidate_first: tuple[bool, ...] = ()

    def describe(self) -> str:
        """The verdict in a few words, for the summary and an item's failure."""
        figures = "" if self.paired is None else f"{self.paired.describe()}: "
        if self.fell:
            return f"{figures}slower than allowed ({self.paired.allowed:g} %), significantly"
        if self.not_compared is not None:
            return f"{figures}not compared: {self.not_compared}"
        detectable = self.paired.detectable
        return f"{figures}passed (a slowdown of {detectable:.1f} % or more would have been seen)"

    def as_dict(self) -> dict:
        return {
            "test": self.test,
            "paired": self.paired.as_dict() if self.paired is not None else None,
            "fell": self.fell,
            "not_compared": self.not_compared,
            "candidate_seconds": list(self.candidate_seconds),
            "baseline_seconds": list(self.baseline_seconds),
            "candidate_first": list(self.candidate_first),
        }


def pair_seconds(
    candidate: Sequence[float], baseline: Sequence[float], candidate_first: Sequence[bool]
) -> dict:
    """The pairs' round seconds and orders as a ``Verdict`` keeps them."""
    return {
        "candidate_seconds": tuple(candidate),
        "baseline_seconds": tuple(baseline),
        "candidate_first": tuple(candidate_first),
    }


def decide(earlier: Sequence[Paired], now: Paired, tests: int, kept: dict | None = None) -> Verdict:
    """``now``'s verdict when it ends, after ``earlier`` (the run's tests already judged),
    among ``tests`` in all (``holm_rejects``); ``kept``: its ``pair_seconds``."""
    kept = kept or {}
    rejected = holm_rejects([*(e.p for e in earlier), now.p], tests)[-1]
    if rejected and now.allowed is not None and now.slowdown > now.allowed:
        return Verdict(now.test, now, fell=True, **kept)
    if math.isinf(now.detectable):
        needed = math.ceil(math.log2(tests / LEVEL))  # all n pairs one way: p = 2^-n
        why = (
            f"too few pairs ({now.pairs}; at least {needed} at this level, more for a "
            "useful test: raise --gost-images)"
        )
        return Verdict(now.test, now, not_compared=why, **kept)
    if now.too_noisy:
        why = (
            f"too noisy: detectable >= {now.detectable:.0f} % (more pairs: raise "
            "--gost-images; or a quieter machine)"
        )
        return Verdict(now.test, now, not_compared=why, **kept)
    return Verdict(now.test, now, **kept)


def check_versus(report: dict, designations: dict[str, list[float]]) -> list[str]:
    """Every disagreement of a report's ``versus`` section with its own pairs: each test's
    figures recomputed from its round seconds and its verdict replayed in the order the
    tests ended; ``designations``: each timed test's candidate round seconds, which its
    pairs' must be."""
    versus = report.get("versus")
    if not versus:
        return []
    found: list[str] = []
    tests, allowed = versus["holm_tests"], versus["allowed"]
    earlier: list[Paired] = []
    for test in versus["tests"]:
        name = test["test"]
        kept = test["candidate_seconds"]
        if kept and name in designations and designations[name][: len(kept)] != kept:
            found.append(f"versus {name}: its candidate's rounds are not the test's timed rounds")
        if test["paired"] is None:
            if test["fell"] or not test["not_compared"]:
                found.append(f"versus {name}: no pairs judged, yet a verdict")
            continue
        try:
            now = paired(
                name,
                test["candidate_seconds"],
                test["baseline_seconds"],
                test["candidate_first"],
                allowed,
                LEVEL / tests,
            )
        except ValueError as exc:
            found.append(f"versus {exc}")
            continue
        verdict = decide(earlier, now, tests)
        earlier.append(now)
        stated = test["paired"]
        for key, value in now.as_dict().items():
            if not _agrees(stated.get(key), value):
                found.append(f"versus {name}: {key} {stated.get(key)!r}, recomputed {value!r}")
        if (verdict.fell, verdict.not_compared) != (test["fell"], test["not_compared"]):
            found.append(
                f"versus {name}: verdict {_said(test['fell'], test['not_compared'])}, "
                f"recomputed {_said(verdict.fell, verdict.not_compared)}"
            )
    return found


def _said(fell: bool, not_compared: str | None) -> str:
    return "fell" if fell else f"not compared ({not_compared})" if not_compared else "passed"


def _agrees(stated, value) -> bool:
    if isinstance(value, float) and isinstance(stated, int | float):
        return math.isclose(stated, value, rel_tol=1e-9, abs_tol=1e-12)
    return stated == value
