"""What a section 9 item does: time one network in one mode, once it verified correct.

The suite's loop (``performance/loop.py``) runs the test's rounds and ends with its record;
this module prepares the test, tells the session what the loop tells it between rounds
(progress, the round reached, checkpoints at boundaries), and turns the record into the
test's timing, its pytest-benchmark statistics (``benchmark_fixture.py``) and its verdict:
the item fails when the judge finds it no result or a gate finds it slower
(``--gost-versus``, ``--gost-compare``). It alone writes the run's ``Results.timed``.
"""

from __future__ import annotations

import time

import pytest

from pytest_gostcnn.judgement import no_result
from pytest_gostcnn.judgement.result import item_failure
from pytest_gostcnn.performance import loop
from pytest_gostcnn.performance.designations import benchmark_name
from pytest_gostcnn.performance.partial import CheckpointClock, PartialCell
from pytest_gostcnn.performance.record import Passed, Progress, Record
from pytest_gostcnn.performance.rounds import Rounds
from pytest_gostcnn.performance.timed_test import Links, TimedTest, subject
from pytest_gostcnn.performance.timing import Timing, macs_per_image
from pytest_gostcnn.reports.compare import compare

from . import benchmark_fixture, meeting, reporting, versus
from .items import case_seed, network_id, record_verdict, verified
from .session import GostSession


def run_benchmark_case(
    session: GostSession, case: tuple[str, str], benchmark, node: pytest.Item
) -> None:
    """Section 9: time one network in one mode, after it verified correct (section 8) on
    every cell, checking a few of the timed rounds after they end; a test kept from
    ``--gost-resume`` is not timed again (the summary's RESUMED line says why)."""
    session.results.timed.begun.append(case)
    _verified_on_every_cell(session, case, node)
    kept = session.results.earlier.timings.get(case)
    if kept is not None:
        benchmark_fixture.not_timed(benchmark, "kept from --gost-resume")
    elif benchmark_fixture.timing_off(benchmark):
        pytest.skip("pytest-benchmark is disabled (--benchmark-disable): nothing was timed")
    timing = kept if kept is not None else _time(session, case, benchmark, node)
    record_timing(session, timing, node, resumed=kept is not None)


def _verified_on_every_cell(session: GostSession, case: tuple[str, str], node) -> None:
    """The test's network verified (section 8), its verdict on the item; skipped on every
    cell when one cell's is not correct."""
    verification = verified(session, *case)
    record_verdict(node, verification)
    own = verification.first_failure if verification.failed else None
    failed = meeting.failures_on_cells(session.resolved.cells, own)
    if failed:
        reasons = "; ".join(f"cell {cell}: {why}" for cell, why in failed)
        pytest.skip(
            f"{verification.subject} is not verified correct in this session ({reasons}); "
            "section 9 times verified implementations only"
        )


def _time(session: GostSession, case: tuple[str, str], benchmark, node: pytest.Item) -> Timing:
    """The test's rounds timed through the suite's loop, into its timing; its
    pytest-benchmark statistics and, with ``--gost-versus``, its paired verdict given."""
    latin, mode = case
    options, resolved, results = session.options, session.resolved, session.results
    cells = resolved.cells
    network = resolved.networks[latin]
    partial = results.earlier.partial
    resume = partial.cells[cells.rank] if partial is not None and partial.key == case else None
    started, before = time.monotonic(), results.suite_seconds.as_dict()
    test = TimedTest(
        resolved.backend,
        network,
        mode,
        session.plan,
        options.seed,
        cells.rank,
        device=f"{cells.host}: {resolved.device}",
        peak=resolved.peak,
        threshold=options.rmse_threshold,
        library=resolved.reference,
    )
    barrier = meeting.barrier(cells, subject(network, mode), session.stalled)
    links = Links(barrier, stall_timeout=options.stall_timeout, estimate=results.selection.estimate)
    rounds, baseline, why_not, error = _prepared(session, test, links, resume)
    _fail_if_any_cell(session, error, "preparing")
    clock = benchmark_fixture.clock(benchmark)
    name = benchmark_name(latin, mode, options.dtype, options.batch)
    done = 0 if resume is None else len(resume.round_seconds)
    results.timed.now = (name, done, session.plan.rounds)  # the summary's, should it stop
    checkpoints = options.report is not None and baseline is None
    record = _timed(session, name, loop.run(rounds, clock, baseline, checkpoints=checkpoints))
    if record.pairs is not None:
        results.suite_seconds.add("versus", record.pairs.baseline_work)
    _count_suite_work(session, record, started, before)
    results.timed.now = None
    reporting.checkpoints_spent(results)  # the test went to its end
    if results.selection.estimate is not None:
        results.selection.estimate.finished(case, record.check_seconds)
    _fail_if_any_cell(session, record.error, "timing")
    timing = Timing(
        latin=latin,
        mode=mode,
        dtype=options.dtype,
        batch=options.batch,
        rounds=session.plan.rounds,
        macs_per_image=macs_per_image(network, mode),
        cells=meeting.timings_on_cells(cells, record.cell_timing),
        **record.data_rules,
    )
    extra_info = {
        "images": timing.images,
        "MAC/s": timing.macs_per_second,
        "ОРП %": timing.orp,
        "test": timing.name,
        "profile": session.plan.label,
        "checked rounds": [a.round for c in timing.cells for a in c.checks],
    }
    benchmark_fixture.record(benchmark, record.round_seconds, clock, extra_info)
    if resolved.versus is not None:
        verdict = versus.verdict(session, timing, record, why_not)
        node.user_properties.append(("gost_versus", verdict.describe()))
    return timing


def record_timing(
    session: GostSession, timing: Timing, node: pytest.Item, resumed: bool = False
) -> None:
    """A test's timing into the session's results and the item's properties; the item
    fails when the judge finds it no result (a check of its rounds failed, a cell's ОРП is
    above 100 % or its peak below its backend's measured rate), else when a gate finds it
    slower. ``resumed``: the timing is the stopped run's (``--gost-resume``), not timed
    again."""
    options = session.options
    session.results.timed.timings[(timing.latin, timing.mode)] = timing
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
    command = session.rerun("test_benchmark", networks=timing.latin, mode=timing.mode)
    fell, note = _gated(session, timing)
    reasons = no_result(timing)  # the judge's: a failed check, a repeated output, ОРП > 100 %
    if reasons:
        pytest.fail(item_failure(timing, reasons, options.seed, command, resumed), pytrace=False)
    if note is not None:  # the run's end says so too, and exits 7 if nothing else fails
        node.user_properties.append(("gost_compared", note))
    if fell is not None:
        session.results.timed.fell[node.nodeid] = fell
        pytest.fail(fell, pytrace=False)


def _gated(session: GostSession, timing: Timing) -> tuple[str | None, str | None]:
    """Why the test fell against ``--gost-versus``'s backend (``reports/paired.py``) or below
    ``--gost-compare``'s baseline (``reports/compare.py``), by the rule the run's end
    applies, so that JUnit XML, the exit status (6) and the last lines agree (None: it did
    not); and the gate's note where it could not compare. The standard's compliance is not
    touched by it; a test the judge finds no result is failed for that instead."""
    allowed = session.options.compare_fail
    paired = session.results.versus.verdicts.get((timing.latin, timing.mode))
    if paired is not None and paired.fell:
        return (
            f"{timing.name} slower than the baseline {versus.named(session)}: {paired.describe()}"
        ), None
    if session.results.earlier.baseline is None or allowed is None:
        return None, None
    path, then = session.results.earlier.baseline
    same = [t for t in then if (t.latin, t.mode) == (timing.latin, timing.mode)]
    comparison = compare(path, same, [timing], allowed)
    undecided = comparison.undecided()
    return comparison.reason(), f"not compared: {undecided[0]}" if undecided else None


def _prepared(
    session: GostSession, test: TimedTest, links: Links, resume: PartialCell | None
) -> tuple[Rounds | None, Rounds | None, str | None, str | None]:
    """The test's rounds and, with ``--gost-versus``, the baseline's beside them (else why
    not); or why the backend could not be prepared."""
    try:
        rounds = loop.prepare(test, links, resume)
    except Exception as exc:  # the backend's failure fails the item on every cell
        why = (
            f"the backend raised {type(exc).__name__}: {exc} while loading the weights or "
            "probing its rate"
        )
        return None, None, None, why
    if session.resolved.versus is None:
        return rounds, None, None, None
    options = session.options
    seed = case_seed(options.seed, network_id(options.batch, test.network.latin, test.mode))
    baseline, why_not = versus.baseline_rounds(session, test, seed)
    return rounds, baseline, why_not, None


def _timed(session: GostSession, name: str, events) -> Record:
    """The loop's events as the session hears them: each progress line, the round reached
    (kept should the run stop inside the test: the summary says so) and, at a boundary, a
    checkpoint of the test so far when one is due (``reporting.write_boundary``)."""
    options, resolved, results = session.options, session.resolved, session.results
    clock = CheckpointClock()
    for event in events:
        if isinstance(event, Progress):
            session.progress(event.line)
        elif isinstance(event, Passed):
            results.timed.now = (name, event.done, event.rounds)
            if event.boundary is not None and options.report is not None:
                reporting.write_boundary(
                    session.config, options, resolved, results, clock, event.boundary, event.share
                )
        else:
            return event
    raise RuntimeError(f"{name}: the rounds ended without their record")


def _count_suite_work(
    session: GostSession, record: Record, started: float, before: dict[str, float]
) -> None:
    """A test's own work beside its timed rounds (``Results.suite_seconds``): this run's
    checks, and the rest of its time less the timed rounds and the checkpoints and the
    baseline backend's work counted since ``before``: loading the weights, the warm-up,
    each round's setup and teardown."""
    work = session.results.suite_seconds
    timed = sum(record.seconds_now)
    apart = sum(work[kind] - before[kind] for kind in ("checkpoints", "versus"))
    around = time.monotonic() - started - timed - record.checked_now - apart
    work.add("checks", record.checked_now)
    work.add("round_setup", max(0.0, around))


def _fail_if_any_cell(session: GostSession, error: str | None, stage: str) -> None:
    """Fail the item on every cell when one cell's backend failed (all stay in step)."""
    failed = meeting.errors_on_cells(session.resolved.cells, error)
    if failed:
        pytest.fail(
            "; ".join(f"cell {cell} failed while {stage}: {why}" for cell, why in failed),
            pytrace=False,
        )
