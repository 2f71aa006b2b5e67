"""The lines of ``--gost-compare`` and ``python -m pytest_gostcnn compare``: each test against
a baseline report's."""

from __future__ import annotations

from pytest_gostcnn.reports.compare import CONFIDENCE, Change, Comparison


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
