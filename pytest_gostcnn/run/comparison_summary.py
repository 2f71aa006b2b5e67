"""The lines of ``--gost-compare`` and ``python -m pytest_gostcnn compare``: each test's
ОРП against a baseline report's."""

from __future__ import annotations

from pytest_gostcnn.reports.compare import Change, Comparison


def comparison_lines(comparison: Comparison) -> list[str]:
    """Each test's ОРП against the baseline's: both, the change, both runs' spread (the mean
    round's excess over the median, in percent) and whether it fell."""
    if comparison.allowed is None:
        rule = "nothing fails without a drop allowed (--gost-compare-fail, compare --fail)"
    else:
        rule = (
            f"a test fails when its ОРП falls more than {comparison.allowed:g} % below the "
            "baseline's, beyond the larger of the two runs' spread"
        )
    lines = [
        f"ОРП against the baseline {comparison.baseline}: {rule}",
        f"{'test':<26} {'baseline ОРП %':>14} {'now ОРП %':>10} {'change %':>9} "
        f"{'spread % then/now':>17}",
    ]
    for c in comparison.changes:
        lines.append(
            f"{c.test:<26} {_figure(c.baseline, '.3g'):>14} {_figure(c.now, '.3g'):>10} "
            f"{_figure(c.change, '+.1f'):>9} "
            f"{_figure(c.baseline_spread, '.1f') + ' / ' + _figure(c.now_spread, '.1f'):>17}"
            f"  {_verdict(c)}"
        )
    return lines


def _figure(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _verdict(change: Change) -> str:
    if change.baseline_spread is None:
        return "not in the baseline"
    if change.now_spread is None:
        return "not timed in this run"
    if change.change is None:
        return "no ОРП (no peak)"
    if change.limit is None:
        return ""
    return f"{'FELL' if change.fell else 'ok'} (limit {change.limit:.1f} %)"
