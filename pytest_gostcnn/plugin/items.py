"""What each suite item does: verify a layer step or a network, or time a network.

The suite (``suite/conformance.py``) calls these with the plugin's session; the arithmetic
lives in ``conformance/verification.py`` and ``performance/rounds.py``.
"""

from __future__ import annotations

import math
import time
import zlib

import numpy as np
import pytest

from pytest_gostcnn.conformance.fixed_point import calibration
from pytest_gostcnn.conformance.layer_cases import LayerCase
from pytest_gostcnn.conformance.verification import (
    LayerData,
    Verification,
    prepare_layer,
    verify_layer,
    verify_network,
)
from pytest_gostcnn.judgement import no_result
from pytest_gostcnn.judgement.compliance import ReasonKind, above_peak
from pytest_gostcnn.machine.peak import si
from pytest_gostcnn.machine.pool import reference_work
from pytest_gostcnn.model.fixed_point import integer_type
from pytest_gostcnn.performance.cells import Cells
from pytest_gostcnn.performance.designations import benchmark_name
from pytest_gostcnn.performance.paired import PairedRounds
from pytest_gostcnn.performance.partial import CheckpointClock, PartialCell, PartialTest
from pytest_gostcnn.performance.rounds import Links, Rounds, TimedTest, subject
from pytest_gostcnn.performance.stall import stall_deadline
from pytest_gostcnn.performance.timing import Timing, macs_per_image
from pytest_gostcnn.reports.compare import compare
from pytest_gostcnn.run.resolution import case_steps, layer_item_id, layer_params

from . import meeting, reporting, versus
from .session import GostSession


def network_id(batch: int, latin: str, mode: str) -> str:
    return f"{latin}-{mode}-B{batch}"


def _data_id(case: LayerCase, dtype: str) -> str:
    """A layer case's id without its step: the steps of one case share its data."""
    return f"{case.layer.type.name}-{case.tag}-{dtype}"


def parametrize(session: GostSession, metafunc: pytest.Metafunc) -> None:
    """The suite's items: the steps of every small layer case and of every distinct layer
    of the selected networks at its own shape, every network in every mode."""
    wanted = {"gost_layer_case", "gost_network_case", "gost_benchmark_case"} & set(
        metafunc.fixturenames
    )
    if not wanted:
        return
    options, networks = session.options, session.resolved.networks
    if "gost_layer_case" in wanted:
        params = layer_params(options, networks)
        ids = [layer_item_id(c, step, options.dtype) for c, step in params]
        metafunc.parametrize("gost_layer_case", params, ids=ids)
    for name in ("gost_network_case", "gost_benchmark_case"):
        if name in wanted:
            params = [(latin, mode) for latin in networks for mode in options.modes]
            ids = [network_id(options.batch, latin, mode) for latin, mode in params]
            metafunc.parametrize(name, params, ids=ids)


def case_seed(seed: int, test_id: str) -> int:
    """The seed of one test's data: the session seed and the test's id, nothing else."""
    return int(np.random.SeedSequence([seed, zlib.crc32(test_id.encode())]).generate_state(1)[0])


def run_layer_case(session: GostSession, case: tuple[LayerCase, str], node: pytest.Item) -> None:
    layer_case, step = case
    options, test_id = session.options, node.callspec.id
    prepare = None
    if layer_case.network_shape:  # large: the case's steps share one draw and reference
        prepare = _shared_data(session, layer_case)
    started = time.monotonic()
    with reference_work():  # the float64 reference, sized to never collapse
        result = verify_layer(
            session.resolved.backend,
            layer_case.layer,
            step,
            options.batch,
            case_seed(options.seed, test_id),
            subject=test_id,
            threshold=options.rmse_threshold,
            draw_input=layer_case.draw_input,
            prepare=prepare,
            saturating=layer_case.saturating,
            library=session.resolved.reference,
        )
    session.results.suite_seconds["layer_verification"] += time.monotonic() - started
    result.rows = layer_case.rows
    session.results.layers.append(result)
    _record_verdict(node, result)
    if result.failed:
        _fail(options.seed, result, session.rerun(f"test_layer and {test_id}"))


def _shared_data(session: GostSession, case: LayerCase):
    """A ``prepare`` for ``verify_layer`` that draws the case's data and computes its
    reference through its last step once, for all its steps; only the newest is kept."""
    options = session.options
    data_id = _data_id(case, options.dtype)

    def prepare() -> LayerData:
        if data_id not in session.results.layer_data:
            session.results.layer_data.clear()  # one case at a time: network shapes are large
            session.results.layer_data[data_id] = prepare_layer(
                case.layer,
                case_steps(options, case)[-1],
                options.batch,
                case_seed(options.seed, data_id),
                options.dtype,
                case.draw_input,
                library=session.resolved.reference,
            )
        return session.results.layer_data[data_id]

    return prepare


def run_network_case(session: GostSession, case: tuple[str, str], node: pytest.Item) -> None:
    latin, mode = case
    result = _verified(session, latin, mode)
    _record_verdict(node, result)
    if result.failed:
        command = session.rerun("test_network", networks=latin, mode=mode)
        _fail(session.options.seed, result, command)


def _verified(session: GostSession, latin: str, mode: str) -> Verification:
    """This session's verification of a network in a mode, run now if it has not been."""
    options, results = session.options, session.results
    if (latin, mode) not in results.networks:
        network = session.resolved.networks[latin]
        started = time.monotonic()
        with reference_work():
            results.networks[(latin, mode)] = verify_network(
                session.resolved.backend,
                network,
                mode,
                options.batch,
                case_seed(options.seed, network_id(options.batch, latin, mode)),
                options.rmse_threshold,
                options.weights,
                library=session.resolved.reference,
            )
        seconds = time.monotonic() - started
        results.suite_seconds["network_verification"] += seconds
        if results.estimate is not None:  # the float64 iterations an audit runs, as fast
            results.estimate.verified(seconds, macs_per_image(network, mode) * options.batch)
    return results.networks[(latin, mode)]


def _record_verdict(node: pytest.Item, result: Verification) -> None:
    """The verdict and the worst СКО/СКОП as the item's properties (JUnit XML shows them)."""
    worst = result.worst
    ratio = None if worst is None or math.isinf(worst.ratio) else worst.ratio
    node.user_properties += [
        ("gost_verdict", result.verdict),
        ("gost_worst_rmse_ratio", "-" if ratio is None else f"{ratio:.3g}"),
        ("gost_worst_array", worst.name if worst else "-"),
    ]


def run_benchmark_case(
    session: GostSession, case: tuple[str, str], benchmark, node: pytest.Item
) -> None:
    """Section 9: time one network in one mode, after it verified correct (section 8),
    auditing a few of the timed rounds after they end."""
    latin, mode = case
    options, resolved = session.options, session.resolved
    session.results.benchmarked.append(case)
    cells = resolved.cells
    verification = _verified(session, latin, mode)
    _record_verdict(node, verification)
    own = verification.first_failure if verification.failed else None
    failed = meeting.failures_on_cells(cells, own)
    if failed:
        reasons = "; ".join(f"cell {cell}: {why}" for cell, why in failed)
        pytest.skip(
            f"{verification.subject} is not verified correct in this session ({reasons}); "
            "section 9 times verified implementations only"
        )
    if case in session.results.resumed:
        # Not timed again. pytest-benchmark warns at teardown of a fixture left unused (no
        # mode set): the summary's RESUMED line says why it was.
        benchmark._mode = "kept from --gost-resume"
        _record_timing(session, session.results.resumed[case], node, resumed=True)
        return
    network = resolved.networks[latin]
    run_plan = session.plan
    rounds, error = None, None
    barrier = meeting.barrier(cells, subject(network, mode), session.stalled)
    device = f"{cells.host}: {resolved.device}"
    partial = session.results.resumed_partial
    resume = partial.cells[cells.rank] if partial is not None and partial.key == case else None
    started, before = time.monotonic(), dict(session.results.suite_seconds)
    pairs, why_not = None, None  # --gost-versus: the two backends' rounds, or why not
    try:
        test = TimedTest(
            resolved.backend,
            network,
            mode,
            run_plan,
            options.seed,
            cells.rank,
            calibrate=calibration(options.dtype) if integer_type(options.dtype) else None,
            threshold=options.rmse_threshold,
            library=resolved.reference,
        )
        links = Links(
            session.progress,
            barrier=barrier,
            stall_timeout=options.stall_timeout,
            estimate=session.results.estimate,
            boundary=None
            if resolved.versus
            else _boundary(session, latin, mode, benchmark, device),
        )
        rounds = Rounds(test, links, resume)
        if resolved.versus is not None:
            seed = case_seed(options.seed, network_id(options.batch, latin, mode))
            baseline, why_not = versus.baseline_rounds(session, test, seed)
            pairs = PairedRounds(rounds, baseline) if baseline is not None else None
    except Exception as exc:  # the backend's failure fails the item on every cell
        error = (
            f"the backend raised {type(exc).__name__}: {exc} while loading the weights or "
            "probing its rate"
        )
    if barrier is not None:  # a cell hung loading its weights must not hold the others
        barrier(stall_deadline(options.stall_timeout, None), "loading the weights")
    _fail_if_any_cell(cells, error, "preparing")
    name = benchmark_name(latin, mode, options.dtype, options.batch)
    session.results.timing_now = (name, rounds)  # kept if the run stops in it: the summary says so
    loop = rounds if pairs is None else pairs
    benchmark.pedantic(
        loop.target,
        setup=loop.setup,
        teardown=loop.teardown,
        rounds=run_plan.rounds - rounds.start,  # a resumed test: the rounds left
        warmup_rounds=run_plan.warmup_rounds,
    )
    loop.end()
    if pairs is not None and benchmark.stats is not None:  # it timed both: the candidate's
        benchmark.stats.stats.data[:] = pairs.candidate_seconds
        baseline_work = sum(pairs.baseline_seconds) + pairs.baseline.audit_seconds
        session.results.suite_seconds["versus"] += baseline_work
    _count_suite_work(session, rounds, benchmark, resume, started, before)
    session.results.timing_now = None
    session.results.partial = None  # the test went to its end: its checkpoints are spent
    if session.results.estimate is not None:
        session.results.estimate.finished(case, rounds.audit_seconds)
    _fail_if_any_cell(cells, rounds.error, "timing")
    if benchmark.stats is None:
        pytest.skip("pytest-benchmark is disabled (--benchmark-disable): nothing was timed")
    stats = benchmark.stats.stats
    own_timing = rounds.record(stats.data, cells.rank, device, resolved.peak)
    stats.data[:0] = rounds.earlier_seconds  # pytest-benchmark's table: the whole test's
    timing = Timing(
        latin=latin,
        mode=mode,
        dtype=options.dtype,
        batch=options.batch,
        rounds=run_plan.rounds,
        macs_per_image=macs_per_image(network, mode),
        cells=meeting.timings_on_cells(cells, own_timing),
        **rounds.data_rules,
    )
    benchmark.extra_info.update(
        {
            "images": timing.images,
            "MAC/s": timing.macs_per_second,
            "ОРП %": timing.orp,
            "test": timing.name,
            "profile": run_plan.label,
            "audited rounds": [a.round for c in timing.cells for a in c.audits],
        }
    )
    if resolved.versus is not None:
        node.user_properties.append(
            ("gost_versus", versus.verdict(session, timing, pairs, why_not).describe())
        )
    _record_timing(session, timing, node)


def _count_suite_work(
    session: GostSession,
    rounds: Rounds,
    benchmark,
    resume: PartialCell | None,
    started: float,
    before: dict[str, float],
) -> None:
    """A test's own work beside its timed rounds (``Results.suite_seconds``): this run's
    audits, and the rest of its time less the timed rounds and the checkpoints and the
    baseline backend's work counted since ``before``: loading the weights, the warm-up,
    each round's setup and teardown."""
    work = session.results.suite_seconds
    timed = sum(benchmark.stats.stats.data) if benchmark.stats is not None else 0.0
    audits = rounds.audit_seconds - (resume.audit_seconds if resume is not None else 0.0)
    apart = sum(work[kind] - before[kind] for kind in ("checkpoints", "versus"))
    around = time.monotonic() - started - timed - audits - apart
    work["audits"] += audits
    work["round_setup"] += max(0.0, around)


def _boundary(session: GostSession, latin: str, mode: str, benchmark, device: str):
    """What a test's rounds call at each boundary (``Rounds.boundary``): a checkpoint of
    the test so far, when one is due (``reporting.write_boundary``)."""
    options, resolved = session.options, session.resolved
    if options.report is None:
        return None
    clock = CheckpointClock()

    def boundary(rounds: Rounds) -> None:
        test = PartialTest(
            latin,
            mode,
            options.dtype,
            options.batch,
            rounds.plan.rounds,
            rounds.boundary_rounds,
            rounds.number,
            cells=(),
        )
        own = None  # the backend failed: its rounds are no place to go on from
        if rounds.error is None:
            own = rounds.partial(benchmark.stats.stats.data, resolved.cells.rank, device)
        reporting.write_boundary(
            session.config, options, resolved, session.results, clock, test, own
        )

    return boundary


def _record_timing(
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


def _fail_if_any_cell(cells: Cells, error: str | None, stage: str) -> None:
    """Fail the item on every cell when one cell's backend failed (all stay in step)."""
    failed = meeting.errors_on_cells(cells, error)
    if failed:
        pytest.fail(
            "; ".join(f"cell {cell} failed while {stage}: {why}" for cell, why in failed),
            pytrace=False,
        )


def _fail(seed: int, result: Verification, command: str) -> None:
    lines = [f"{result.subject}: {result.verdict}", f"first failure: {result.first_failure}"]
    failing = [c for c in result.checks if not c.passed]
    if len(failing) > 1:
        lines.append(f"{len(failing)} of {len(result.checks)} arrays failed; the worst:")
        lines += [f"  {c.describe()}" for c in sorted(failing, key=lambda c: -c.ratio)[:5]]
    lines += [f"seed: --gost-seed={seed}", f"rerun: {command}"]
    pytest.fail("\n".join(lines), pytrace=False)
