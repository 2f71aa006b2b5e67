"""A timed test's verdict: its timing kept in the session's results and the item's
properties, and the item failed when the judge finds it no result or a gate finds it
slower (``--gost-versus``, ``--gost-compare``)."""

from __future__ import annotations

import pytest

from pytest_gostcnn.judgement import no_result
from pytest_gostcnn.judgement.result import item_failure
from pytest_gostcnn.performance.timing import Timing
from pytest_gostcnn.reports.compare import compare

from . import versus
from .session import GostSession


def record_timing(
    session: GostSession, timing: Timing, node: pytest.Item, resumed: bool = False
) -> None:
    """A test's timing into the session's results and the item's properties; the item
    fails when the judge finds it no result (a check of its rounds failed, a cell's ОРП is
    above 100 % or its peak below its backend's measured rate). ``resumed``: the timing is
    the stopped run's (``--gost-resume``), not timed again."""
    options = session.options
    session.results.timings[(timing.latin, timing.mode)] = timing
    if resumed:
        session.progress(
            f"{timing.name}: resumed from --gost-resume={options.resume}, not timed again"
        )
    checks = [a for c in timing.cells for a in c.checks]
    node.user_properties += [
        ("gost_test", timing.name),
        ("gost_orp_percent", "-" if timing.orp is None else f"{timing.orp:.3g}"),
        ("gost_checks", f"{sum(a.passed for a in checks)}/{len(checks)} passed"),
        *([("gost_resumed_from", options.resume)] if resumed else []),
        ("gost_mean_above_median_percent", f"{100 * timing.spread.mean_above_median:.3g}"),
    ]
    reasons = no_result(timing)  # the judge's: a failed check, a repeated output, ОРП > 100 %
    if not reasons:
        _gate(session, timing, node)
        return
    command = session.rerun("test_benchmark", networks=timing.latin, mode=timing.mode)
    pytest.fail(item_failure(timing, reasons, options.seed, command, resumed), pytrace=False)


def _gate(session: GostSession, timing: Timing, node: pytest.Item) -> None:
    """Fail the item when its test fell against ``--gost-versus``'s backend
    (``reports/paired.py``) or below ``--gost-compare``'s baseline (``reports/compare.py``),
    by the rule the run's end applies, so that JUnit XML, the exit status (6) and the last
    lines agree; the standard's compliance is not touched by it."""
    allowed = session.options.compare_fail
    paired = session.results.versus.get((timing.latin, timing.mode))
    if paired is not None and paired.fell:
        why = f"{timing.name} slower than the baseline {versus.named(session)}: {paired.describe()}"
        session.results.fell[node.nodeid] = why
        pytest.fail(why, pytrace=False)
    if session.results.baseline is None or allowed is None:
        return
    path, then = session.results.baseline
    same = [t for t in then if (t.latin, t.mode) == (timing.latin, timing.mode)]
    comparison = compare(path, same, [timing], allowed)
    undecided = comparison.undecided()
    if undecided:  # the run's end says so too, and exits 7 if nothing else fails
        node.user_properties.append(("gost_compared", f"not compared: {undecided[0]}"))
    why = comparison.reason()
    if why is not None:
        session.results.fell[node.nodeid] = why
        pytest.fail(why, pytrace=False)
