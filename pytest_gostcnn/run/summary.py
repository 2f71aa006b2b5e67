"""The lines of the header and the terminal summary: section 8 verdicts, section 9 results
and evaluation, the run's last line.

Only rendering: the verdicts, timings and evaluations are computed where they live.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from pytest_gostcnn.machine.peak import Peak, si
from pytest_gostcnn.model.dtypes import master_dtype
from pytest_gostcnn.model.fixed_point import integer_type
from pytest_gostcnn.model.network import CANONICAL_SET, CYRILLIC, DEFAULT_TABLE_SET
from pytest_gostcnn.performance.contention import SHARED_LIMIT
from pytest_gostcnn.performance.designations import MODE_LETTERS, transliterate
from pytest_gostcnn.performance.evaluation import Evaluation, describe
from pytest_gostcnn.performance.partial import PartialTest
from pytest_gostcnn.performance.plan import Plan
from pytest_gostcnn.performance.timing import NOISY_MEAN_ABOVE_MEDIAN, Timing
from pytest_gostcnn.reports.compare import Change, Comparison
from pytest_gostcnn.reports.load import blas_setup

from .options import Options
from .resolution import Resolved
from .results import Assessment, Results

FAILED_SHOWN = 10  # failed layer items named in the summary; the report has them all
CANONICAL_NON_COMPLIANT = (
    "CANONICAL SET: NOT COMPLIANT (the widely used networks at full size, not the standard's "
    "typical networks)"
)
NON_COMPLIANT = (
    "QUICK PROFILE: NOT COMPLIANT (section 9.3 requires 1,000,000 images per cell; "
    "run --gost-profile=full)"
)
IMAGES_NON_COMPLIANT = (
    "IMAGES={images}: NOT COMPLIANT (section 9.3 requires 1,000,000 images per cell; "
    "run --gost-profile=full instead of --gost-images)"
)


def header_lines(
    options: Options,
    resolved: Resolved,
    run_plan: Plan,
    resumed: Sequence[Timing],
    partial: PartialTest | None = None,
) -> list[str]:
    """The lines under pytest's header: the backend and its device, the options, the tables
    and networks; an option that has no effect; the tests kept from ``--gost-resume``."""
    if resolved.backend is None:
        backend = f"{resolved.backend_name} (unavailable: {resolved.unavailable})"
    else:
        backend = f"{resolved.backend_name} {resolved.version} on {resolved.device}"
    networks = ", ".join(
        f"{n.letter} ({n.latin}, {resolved.provenances[latin].describe()})"
        for latin, n in resolved.networks.items()
    )
    threshold = (
        ""
        if options.rmse_threshold is None
        else f"; СКОП OVERRIDDEN: --gost-rmse-threshold={options.rmse_threshold:g}"
    )
    count = (
        f"profile {options.profile}"
        if options.images is None
        else f"images {options.images} per test ({run_plan.rounds} rounds of "
        f"{options.batch}; no profile)"
    )
    lines = [
        f"gostcnn: backend {backend}; dtype {options.dtype}; batch {options.batch}; "
        f"mode {'+'.join(options.modes)}; seed {options.seed}; weights {options.weights}; "
        f"{count}" + threshold,
        f"gostcnn: tables {resolved.table_set}; networks {networks}",
    ]
    if resolved.invocation:
        lines.append(threads_line(resolved))
    if options.stall_timeout is not None and resolved.cells.size == 1:
        lines.append(
            f"gostcnn: --gost-stall-timeout={options.stall_timeout:g} has no effect: one "
            "computing cell waits at no barrier (it watches the cells of an mpirun run)"
        )
    if options.resume is not None:
        kept = ", ".join(t.name for t in resumed) or "none"
        lines.append(f"gostcnn: resuming {options.resume}: tests not timed again: {kept}")
    if partial is not None:
        lines.append(
            f"gostcnn: resuming {partial.name} after timed round {partial.done} of "
            f"{partial.rounds} (its last checkpoint): those rounds are the stopped run's"
        )
    return lines


def threads_line(resolved: Resolved) -> str:
    """The cell's cores, the backend's threads, BLAS's, the thread settings and the load."""
    invocation = resolved.invocation
    pool = resolved.system.get("threads")
    settings = ", ".join(f"{k}={v}" for k, v in invocation["environment"].items())
    load = invocation["load_average"]
    return (
        f"gostcnn: cell {invocation['cell_cores']} cores"
        + (f"; backend threads {pool}" if pool is not None else "")
        + f"; BLAS {blas_setup(invocation['blas'])}"
        + (f"; {settings}" if settings else "")
        + (f"; load average {load[0]:.2g} at the start" if load else "")
    )


def nothing_verified(options: Options, resolved: Resolved, results: Results) -> list[str]:
    """Why a run with ``--gost-*`` options verified nothing, when it did not: a run that
    skipped or never collected the suite must not pass for a verified one."""
    if results.verified_any:
        return []
    if not results.suite_items:
        if "backend" not in options.given:
            return [
                "--gost-* options were given but the suite did not run: it runs when "
                "--gost-backend=NAME is given without test paths"
            ]
        return ["the suite did not run: it runs when --gost-backend is given without test paths"]
    if resolved.backend is None:
        return [
            f"NOTHING WAS VERIFIED: backend {resolved.backend_name} is unavailable "
            f"({resolved.unavailable}); every item of the suite was skipped"
        ]
    return []


def stopped_lines(state: dict, resumed: str | None) -> list[str]:
    """What a run that did not reach its end was: which performance tests finished, which
    did not, the test it stopped in; and which tests a resumed run did not time again."""
    lines = []
    if state["resumed_from"]:
        tests = state["resumed_from"]["tests"]
        lines.append(
            f"RESUMED from --gost-resume={resumed} (written {state['resumed_from']['created']}): "
            f"{len(tests)} performance test{'s' * (len(tests) != 1)} kept from it, not timed "
            "again: " + (", ".join(tests) or "none (it finished none)")
        )
        continued = state["resumed_from"].get("continued")
        if continued:
            lines.append(
                f"  {continued['test']} went on from its checkpoint: its first "
                f"{continued['timed_rounds_kept']} timed rounds (times and audits) are the "
                "stopped run's"
            )
    if state["complete"]:
        return lines
    why = state["stopped"] or "not every selected item ran"
    finished, unfinished = state["finished"], state["unfinished"]
    lines.append(
        f"RUN INCOMPLETE ({why}): {len(finished)} of {len(finished) + len(unfinished)} "
        "performance tests finished; NOT COMPLIANT because incomplete"
    )
    lines.append("  finished: " + (", ".join(finished) or "none"))
    lines.append("  not finished: " + (", ".join(unfinished) or "none"))
    if state["other_items_not_run"]:
        lines.append(f"  other items of the suite not run: {state['other_items_not_run']}")
    where, partial = state["stopped_in"], state.get("partial")
    if where:
        lines.append(
            f"  stopped in {where['test']} after {where['timed_rounds_done']} of "
            f"{where['rounds']} timed rounds: not a result, it is timed again when resumed"
            if partial is None or partial["test"] != where["test"]
            else f"  stopped in {where['test']} after {where['timed_rounds_done']} of "
            f"{where['rounds']} timed rounds: not a result; the report keeps it after timed "
            f"round {partial['timed_rounds_done']}, where --gost-resume goes on"
        )
    elif partial is not None:
        lines.append(
            f"  kept part-way: {partial['test']} after timed round "
            f"{partial['timed_rounds_done']} of {partial['rounds']}, where --gost-resume goes on"
        )
    return lines


def verification_lines(
    options: Options, resolved: Resolved, results: Results, rerun: Callable[..., str]
) -> list[str]:
    tables = "" if resolved.table_set == DEFAULT_TABLE_SET else f"; tables {resolved.table_set}"
    lines = [
        f"backend {resolved.backend_name} {resolved.version} on {resolved.device}; "
        f"dtype {options.dtype}; batch {options.batch}; seed {options.seed}; "
        f"weights {options.weights}{tables}"
    ]
    master = master_dtype(options.dtype)
    if master != options.dtype and "training" in options.modes:
        lines.append(
            f"training keeps gradients and master weights in {master} and verifies them "
            f"there ({options.dtype} cannot hold section 8's gradients; standard.md §6)"
        )
    if options.rmse_threshold is not None:
        lines.append(
            f"СКОП OVERRIDDEN: --gost-rmse-threshold={options.rmse_threshold:g} admits an СКО "
            "up to that share of each reference array's RMS, instead of the derived СКОП"
        )
    if results.layers:
        failed = [r.subject for r in results.layers if r.failed]
        shaped = sum(1 for r in results.layers if r.rows)
        shown = ", ".join(failed[:FAILED_SHOWN])
        if len(failed) > FAILED_SHOWN:
            shown += f" and {len(failed) - FAILED_SHOWN} more"
        saturating = sum(1 for r in results.layers if "-saturating-" in r.subject)
        small = len(results.layers) - shaped
        lines.append(
            f"layers: {_count(len(results.layers), 'layer step')} verified "
            f"({_count(small, 'small edge case')}"
            + (f", {saturating} of them saturating" if saturating else "")
            + f", {shaped} at the networks' own shapes), {len(failed)} failed"
            + (": " + shown if failed else "")
        )
        if integer_type(options.dtype) is not None:
            lines.append(
                f"  {options.dtype}: a layer step that requantises is held to СКО and to its "
                "mean error (round to nearest); the saturating ones get scales that leave a "
                "tenth of their values past the range (saturate, not wrap): standard.md §6"
            )
    if resolved.cells.size > 1:
        lines.append(f"computing cells: {resolved.cells.size} (one MPI rank each)")
        lines += [f"  cell {r['cell']}: {r['host']}: {r['device']}" for r in results.cell_reports]
        for report in results.cell_reports:
            lines += [
                f"  cell {report['cell']} failed {item}: {why}" for item, why in report["failures"]
            ]
    if not results.networks:
        return lines
    lines.append(f"{'network':<8} {'mode':<10} {'verdict':<16} {'worst СКО/СКОП':>15}  array")
    for (latin, mode), result in results.networks.items():
        worst = result.worst
        ratio = "-" if worst is None or math.isinf(worst.ratio) else f"{worst.ratio:.3g}"
        lines.append(
            f"{CYRILLIC[latin]} ({latin})".ljust(8)
            + f" {mode:<10} {result.verdict:<16} {ratio:>15}  {worst.name if worst else '-'}"
        )
    for (latin, mode), result in results.networks.items():
        if result.failed:
            lines.append(f"{CYRILLIC[latin]} ({latin}) {mode}: {result.first_failure}")
            lines.append(f"  rerun: {rerun('test_network', networks=latin, mode=mode)}")
    return lines


def performance_lines(
    run_plan: Plan,
    dtype: str,
    peak: Peak | None,
    table_set: str,
    timings: Sequence[Timing],
    evaluations: Sequence[Evaluation],
) -> list[str]:
    """Section 9's lines: of this run, or of merged reports
    (``python -m pytest_gostcnn evaluate``)."""
    counted = run_plan.meets_image_count  # 9.3's count
    if counted:
        lines = []
    elif run_plan.requested is None:
        lines = [NON_COMPLIANT]
    else:
        lines = [IMAGES_NON_COMPLIANT.format(images=run_plan.requested)]
    if table_set == CANONICAL_SET:
        lines.append(CANONICAL_NON_COMPLIANT)
    if peak is None:
        lines.append("no peak: ОРП needs --gost-peak=MAC/s (no estimate for this device)")
    else:
        label = "ESTIMATED " if peak.estimated else ""
        lines.append(f"cell peak ({dtype}): {label}{peak.describe()}")
    above = [
        f"{CYRILLIC[t.latin]} ({t.latin}) {t.mode}"
        for t in timings
        if t.orp is not None and t.orp > 100
    ]
    if above:
        lines.append(
            f"ОРП ABOVE 100 % ({', '.join(above)}): faster than the cell peak, so the peak "
            "or the time is wrong: those tests failed and count in no evaluation (--gost-peak, "
            "or a backend whose rounds end before its work)"
        )
    shared = [t for t in timings if t.shared_cells]
    if shared:
        lines.append(shared_line(shared))
    noisy = [t for t in timings if t.spread.noisy]
    if noisy:
        lines.append(noisy_line(noisy))
    if not timings:
        lines.append(
            "nothing was timed: no performance test finished (see the skip reasons, -rs: "
            "e.g. --benchmark-disable, or a failed verification; or the run stopped)"
        )
    lines.append(
        f"{'test':<40} {'images':>8} {'time s':>9} {'images/s':>9} {'MAC/s':>10} {'ОРП %':>7}"
    )
    for t in timings:
        orp = "-" if t.orp is None else f"{t.orp:.3g}"
        lines.append(
            f"{t.designation:<40} {t.images:>8} "
            f"{_seconds(t.seconds):>9} {t.images / t.seconds:>9.3g} {si(t.macs_per_second):>9}  "
            f"{orp:>6}"
        )
        if len(t.cells) > 1:  # each cell too, so that a straggler shows
            for cell in t.cells:
                cell_orp = t.cell_orp(cell)
                lines.append(
                    f"{'  cell ' + str(cell.cell):<40} {cell.images:>8} {cell.seconds:>9.3g} "
                    f"{cell.images / cell.seconds:>9.3g} "
                    f"{si(t.cell_macs_per_second(cell)):>9}  "
                    f"{'-' if cell_orp is None else f'{cell_orp:.3g}':>6}"
                )
        lines.append(f"  {audit_line(t)}")
        lines.append(f"  {spread_line(t)}")
        if any(cell.contention for cell in t.cells):
            lines.append(f"  {contention_line(t)}")
        lines.append(f"  {t.comment}")
        lines += [f"  not compliant: {reason}" for reason in t.reasons if counted]
    for evaluation in evaluations:
        lines.append(f"evaluation {evaluation.designation}:")
        lines += [f"  {line}" for line in describe(evaluation)]
        lines += [f"  {line}" for line in evaluation.comment]
        lines += [f"  not compliant: {reason}" for reason in evaluation.reasons]
    return lines


def audit_line(timing: Timing) -> str:
    """The audited rounds of one test: which, the verdict, the worst array, and their
    time, which the test's does not count."""
    audits = [(cell.cell, a) for cell in timing.cells for a in cell.audits]
    seconds = sum(cell.audit_seconds for cell in timing.cells)
    if len(timing.cells) > 1:
        rounds = "; ".join(
            f"cell {cell.cell}: {', '.join(str(a.round) for a in cell.audits) or 'none'}"
            for cell in timing.cells
        )
    else:
        rounds = ", ".join(str(a.round) for _, a in audits) or "none"
    failed = timing.failed_audits
    if failed:
        cell, audit = failed[0]
        verdict = f"FAILED, round {audit.round}: {audit.failure}"
    else:
        ratios = [a for _, a in audits if a.worst_ratio is not None]
        worst = max(ratios, key=lambda a: a.worst_ratio, default=None)
        verdict = "passed" + (
            f", worst СКО/СКОП {worst.worst_ratio:.3g} ({worst.worst_array})" if worst else ""
        )
    return (
        f"audited rounds {rounds} of {timing.rounds}: {verdict}; "
        f"{seconds:.3g} s, not counted in the time"
    )


def spread_line(timing: Timing) -> str:
    """How the test's rounds spread: the median, the slowest against it, and the mean (the
    ОРП's) above it."""
    spread = timing.spread
    side = "above" if spread.mean_above_median >= 0 else "below"
    return (
        f"rounds: median {spread.median_seconds:.3g} s, slowest round "
        f"{spread.slowest_to_median:.3g}x the median, mean (the ОРП's) "
        f"{_percent(abs(spread.mean_above_median))} % {side} the median"
        + (" (NOISY)" if spread.noisy else "")
    )


def contention_line(timing: Timing) -> str:
    """How long the test's threads waited for a core in its timed rounds, on each cell."""
    parts = [
        (f"cell {cell.cell}: " if len(timing.cells) > 1 else "")
        + ("not measured" if cell.contention is None else cell.contention.describe())
        + (" (SHARED)" if cell.contention is not None and cell.contention.shared else "")
        for cell in timing.cells
    ]
    return "during the timed rounds: " + "; ".join(parts)


def shared_line(shared: list[Timing]) -> str:
    """The warning for the tests whose cell other processes shared."""
    tests = ", ".join(
        f"{CYRILLIC[t.latin]} ({t.latin}) {t.mode} "
        + "/".join(f"{100 * c.contention.wait_share:.0f} %" for c in t.shared_cells)
        for t in shared
    )
    return (
        f"CELL SHARED ({tests}): these tests' threads waited for a core more than "
        f"{100 * SHARED_LIMIT:.0f} % of their ready time in the timed rounds: other work held "
        "the cell's cores, so their times are not the cell's own and they are NOT COMPLIANT; "
        "rerun on a quiet machine"
    )


def noisy_line(noisy: list[Timing]) -> str:
    """The warning for the tests whose slow rounds moved their ОРП."""
    tests = ", ".join(
        f"{CYRILLIC[t.latin]} ({t.latin}) {t.mode} {_percent(t.spread.orp_lowered)} %"
        for t in noisy
    )
    return (
        f"NOISY ROUNDS ({tests}): the mean round lies more than "
        f"{100 * NOISY_MEAN_ABOVE_MEDIAN:.0f} % above the median, so slow rounds (another "
        "process on the machine, throttling) lowered these ОРП by the share shown against "
        "the median round's rate; rerun on a quiet machine or with more images"
    )


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


def _percent(share: float) -> str:
    """A share in percent, to two figures, and never in exponent notation."""
    return f"{100 * share:.2g}" if 100 * share < 10 else f"{100 * share:.0f}"


def terms(resolved: Resolved, modes: Sequence[str]) -> list[str]:
    """The summary's words, once, for a reader without Russian, and every designation of
    the run in Latin letters."""
    networks = "; ".join(f"{n.letter} ({n.latin}) {n.name}" for n in resolved.networks.values())
    mode_words = ", ".join(
        f"{MODE_LETTERS[mode]} ({transliterate(MODE_LETTERS[mode])}) {mode}" for mode in modes
    )
    named = [
        f"ТП-{n.letter}-{MODE_LETTERS[mode]}" for n in resolved.networks.values() for mode in modes
    ] + [f"ОП-{MODE_LETTERS[mode]}" for mode in modes]
    return [
        "terms: СКО = root-mean-square error against the float64 reference; СКОП = the "
        "admissible СКО (a verdict holds while СКО/СКОП < 1); ОРП = relative real "
        "performance, the MAC/s a test reached as a share of the cells' theoretical peak",
        "designations: ТП-<network>-<mode>-<type>-B<batch> = a performance test, "
        "ОП-<mode>-<type>-B<batch>-N<cells> = an evaluation over N computing cells; "
        f"mode {mode_words}; networks {networks}",
        "in Latin letters: " + ", ".join(f"{d} = {transliterate(d)}" for d in named),
    ]


def _seconds(seconds: float) -> str:
    """A test's time in the table: three figures (2.00, not 2 for 2.004; 0.0137), whole
    seconds from 100 (12346, not 1.23e+04)."""
    if float(f"{seconds:.3g}") >= 100:
        return f"{seconds:.0f}"
    return f"{seconds:#.3g}"


def _count(number: int, noun: str) -> str:
    """``1 layer step``, ``2 layer steps``."""
    return f"{number} {noun}{'s' * (number != 1)}"


def _counted(noun: str, selected: int, ran: Sequence) -> str:
    """How many of the selected verifications of one kind failed, passed, did not run."""
    failed = sum(v.failed for v in ran)
    total = max(selected, len(ran))
    if not total:
        return f"{noun}s not run"
    of = f"{total} selected {noun}{'s' * (total != 1)}"
    if not ran:
        return f"{of} not run"
    text = f"{failed} of {of} failed" if failed else f"{len(ran)} of {of} passed"
    return text + (f", {total - len(ran)} not run" if len(ran) < total else "")


def last_line(results: Results, assessment: Assessment) -> str:
    """One line, like HPL's last: section 8 PASSED, FAILED, INCOMPLETE or NOT RUN with how
    many of the selected layer steps and networks ran and passed, and each evaluation's
    first result, COMPLIANT or NOT COMPLIANT with its first reason."""
    failed_elsewhere = any(
        item.startswith(("test_layer", "test_network"))
        for report in results.cell_reports
        for item, _ in report["failures"]
    )
    verified = results.layers + list(results.networks.values())
    networks = list(results.networks.values())
    selected = results.layer_steps_selected + len(results.networks_selected)
    if any(v.failed for v in verified) or failed_elsewhere:
        verdict = "FAILED"
    elif not verified:
        verdict = "NOT RUN"
    else:  # PASSED only for all that was selected: a stopped run passed only what ran
        verdict = "PASSED" if len(verified) >= selected else "INCOMPLETE"
    counts = [
        _counted("layer step", results.layer_steps_selected, results.layers),
        _counted("network", len(results.networks_selected), networks),
    ]
    parts = [f"verification {verdict}: " + "; ".join(counts)]
    for evaluation in assessment.evaluations:
        result = f"{evaluation.first:.3g} %" if evaluation.first is not None else "incomplete"
        word = "COMPLIANT" if evaluation.compliant else f"NOT COMPLIANT ({evaluation.summary})"
        parts.append(f"{evaluation.mode} evaluation {result}: {word}")
    if not assessment.evaluations:
        parts.append("no evaluation (no benchmark ran)")
    return "GOST R 57700.36-2021: " + "; ".join(parts)
