"""A timed test's verdict: its timing kept in the session's results and the item's
properties, and the item failed when the judge finds it no result or a gate finds it
slower (``--gost-versus``, ``--gost-compare``)."""

from __future__ import annotations

import pytest

from pytest_gostcnn.judgement import no_result
from pytest_gostcnn.judgement.compliance import ReasonKind
from pytest_gostcnn.judgement.result import above_peak
from pytest_gostcnn.machine.peak import si
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
    audits = [a for c in timing.cells for a in c.audits]
    node.user_properties += [
        ("gost_test", timing.name),
        ("gost_orp_percent", "-" if timing.orp is None else f"{timing.orp:.3g}"),
        ("gost_audits", f"{sum(a.passed for a in audits)}/{len(audits)} passed"),
        *([("gost_resumed_from", options.resume)] if resumed else []),
        ("gost_mean_above_median_percent", f"{100 * timing.spread.mean_above_median:.3g}"),
    ]
    reasons = no_result(timing)  # the judge's: a failed audit, a repeated output, ОРП > 100 %
    if not reasons:
        _gate(session, timing, node)
        return
    if reasons[0].kind is ReasonKind.OUTPUT_REPEATED:
        command = session.rerun("test_benchmark", networks=timing.latin, mode=timing.mode)
        pytest.fail(
            f"{reasons[0].text} (docs/benchmarking.md, Checked rounds)\nrerun: {command}",
            pytrace=False,
        )
    if not timing.failed_audits and not above_peak(timing):  # a peak below the probe's rate
        way_out = "give the cell's true peak with --gost-peak=MAC/s"
        pytest.fail(
            f"{reasons[0].text} ({way_out}; docs/benchmarking.md, The peak's floor)",
            pytrace=False,
        )
    if not timing.failed_audits:
        cell, orp = above_peak(timing)[0]
        where = f" on cell {cell.cell}" if len(timing.cells) > 1 else ""
        way_out = (
            "check the value given to --gost-peak"
            if not cell.peak.estimated
            else "give the cell's true peak with --gost-peak=MAC/s, e.g. 2.5T"
        )
        measured = ""
        if cell.probe is not None and cell.probe.macs_per_second > cell.peak.macs_per_second:
            measured = (
                f"; the backend's own kernel ran at {si(cell.probe.macs_per_second)}MAC/s "
                "before the rounds"
            )
        pytest.fail(
            f"{timing.name}: ОРП {orp:.3g} %{where} is above 100 % of the cell peak "
            f"{cell.peak.describe()}{measured}: not a result. Either the peak is wrong "
            f"({way_out}) or the backend's rounds end before its work does (a round ends when "
            "its results reach the host: docs/benchmarking.md, One round)",
            pytrace=False,
        )
    cell, audit = timing.failed_audits[0]
    where = f" on cell {cell}" if len(timing.cells) > 1 else ""
    earlier = " (in the resumed run)" if resumed else ""
    command = session.rerun("test_benchmark", networks=timing.latin, mode=timing.mode)
    pytest.fail(
        "\n".join(
            [
                f"{timing.name}: check of timed {audit.subject} of {timing.rounds}{where}"
                f"{earlier} failed ({audit.verdict}); section 9 counts no result whose rounds "
                "differ from the verified implementation",
                f"first failure: {audit.failure}",
                f"worst array: {audit.worst_array}",
                f"seed: --gost-seed={options.seed}",
                f"rerun: {command}",
            ]
        ),
        pytrace=False,
    )


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
