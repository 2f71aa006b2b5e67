"""The lines of ``--gost-compare`` and ``python -m pytest_gostcnn compare``: each test against
a baseline report's; and of ``--gost-versus``: each test against a baseline backend's
rounds, timed beside it."""

from __future__ import annotations

import math

from pytest_gostcnn.reports.compare import CONFIDENCE, Change, Comparison
from pytest_gostcnn.reports.paired import LEVEL, Verdict, noise_limit


def comparison_lines(comparison: Comparison) -> list[str]:
    """Each test's ОРП in the baseline and now, the ОРП's change, the median round's slowdown
    and the lower end of its confidence interval, and whether it fell."""
    if comparison.allowed is None:
        rule = "nothing fails without a slowdown allowed (--gost-compare-fail, compare --fail)"
    else:
        rule = (
            f"a test fails when its median round is more than {comparison.allowed:g} % slower "
            f"than the baseline's, at {CONFIDENCE:.0%} confidence"
        )
    lines = [
        f"against the baseline {comparison.baseline}: {rule}",
        f"{'test':<26} {'baseline ОРП %':>14} {'now ОРП %':>10} {'change %':>9} "
        f"{'median round %':>14} {'at least %':>10}",
    ]
    for c in comparison.changes:
        lines.append(
            f"{c.test:<26} {_figure(c.baseline, '.3g'):>14} {_figure(c.now, '.3g'):>10} "
            f"{_figure(c.change, '+.1f'):>9} {_figure(c.slowdown, '+.1f'):>14} "
            f"{_figure(c.slowdown_at_least, '+.1f'):>10}  {_verdict(c)}"
        )
    return lines


def _figure(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _verdict(change: Change) -> str:
    if change.timed_in != "both":
        return "not in the baseline" if change.timed_in == "now" else "not timed in this run"
    if change.shared_in is not None:
        return f"not compared: cell shared in {change.shared_in}"
    if change.allowed is None:
        return ""
    return "FELL" if change.fell else "ok"


def versus_lines(baseline: str, allowed: float | None, verdicts: list[Verdict]) -> list[str]:
    """``--gost-versus``: each test's slowdown against the ``baseline`` backend timed
    beside it, the interval, the pairs, p, the smallest slowdown it could have seen, and
    its verdict."""
    if allowed is None:
        rule = "nothing fails without a slowdown allowed (--gost-compare-fail)"
    else:
        rule = (
            f"a test fails when it is more than {allowed:g} % slower, significantly at "
            f"{100 * LEVEL:g} % with Holm's correction across the run's tests; it is not compared "
            f"when the smallest slowdown it could see is above {noise_limit(allowed):g} %"
        )
    lines = [
        f"against the baseline backend {baseline}, round by round: {rule}",
        f"{'test':<26} {'slower %':>9} {f'{CONFIDENCE:.0%} interval %':>20} {'pairs':>5} "
        f"{'p':>7} {'sees %':>7}",
    ]
    for v in verdicts:
        p = v.paired
        if p is None:
            lines.append(f"{v.test:<26} {'-':>9} {'-':>20} {'-':>5} {'-':>7} {'-':>7}  {_said(v)}")
            continue
        interval = f"{_figure(_bounded(p.low), '+.1f')} to {_figure(_bounded(p.high), '+.1f')}"
        lines.append(
            f"{v.test:<26} {p.slowdown:>+9.1f} {interval:>20} {p.pairs:>5} {p.p:>7.2g} "
            f"{_figure(_bounded(p.detectable), '.1f'):>7}  {_said(v)}"
        )
    return lines


def _bounded(value: float) -> float | None:
    return None if math.isinf(value) else value


def _said(verdict: Verdict) -> str:
    if verdict.fell:
        return "FELL"
    if verdict.not_compared is not None:
        return f"not compared: {verdict.not_compared}"
    return "ok" if verdict.paired.allowed is not None else ""
