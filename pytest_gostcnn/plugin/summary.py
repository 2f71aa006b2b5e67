"""The lines of the terminal summary: section 8 verdicts, section 9 results and evaluation."""

from __future__ import annotations

import math
import platform
from typing import TYPE_CHECKING

from pytest_gostcnn.machine.facts import libraries
from pytest_gostcnn.machine.peak import si
from pytest_gostcnn.model.network import CYRILLIC
from pytest_gostcnn.performance.evaluation import (
    Evaluation,
    describe,
    designate_evaluation,
    designate_test,
    evaluate,
)

if TYPE_CHECKING:
    from .session import GostSession

NON_COMPLIANT = (
    "QUICK PROFILE: NOT COMPLIANT (section 9.3 requires 1,000,000 images per cell; "
    "run --gost-profile=full)"
)


def nothing_verified(session: GostSession, backend_given: bool) -> list[str]:
    """Why a run with ``--gost-*`` options verified nothing, when it did not: a run that
    skipped or never collected the suite must not pass for a verified one."""
    if session.results or session.layer_results:
        return []
    if not session.suite_items:
        if not backend_given:
            return [
                "--gost-* options were given but the suite did not run: it runs when "
                "--gost-backend=NAME is given without test paths"
            ]
        return ["the suite did not run: it runs when --gost-backend is given without test paths"]
    if session.backend is None:
        return [
            f"NOTHING WAS VERIFIED: backend {session.backend_name} is unavailable "
            f"({session.unavailable}); every item of the suite was skipped"
        ]
    return []


def verification_lines(session: GostSession) -> list[str]:
    backend = session.backend
    lines = [
        f"backend {session.backend_name} {type(backend).version} on {session.device}; "
        f"dtype {session.dtype}; batch {session.batch}; seed {session.seed}"
    ]
    if session.layer_results:
        failed = [r.subject for r in session.layer_results if r.failed]
        lines.append(
            f"layers: {len(session.layer_results)} layer steps verified, {len(failed)} failed"
            + (": " + ", ".join(failed) if failed else "")
        )
    if session.cells.size > 1:
        lines.append(f"computing cells: {session.cells.size} (one MPI rank each)")
        lines += [f"  cell {r['cell']}: {r['host']}: {r['device']}" for r in session.cell_reports]
        for report in session.cell_reports:
            lines += [
                f"  cell {report['cell']} failed {item}: {why}" for item, why in report["failures"]
            ]
    if not session.results:
        return lines
    lines.append(f"{'network':<8} {'mode':<10} {'verdict':<16} {'worst СКО/СКОП':>15}  array")
    for (latin, mode), result in session.results.items():
        worst = result.worst
        ratio = "-" if worst is None or math.isinf(worst.ratio) else f"{worst.ratio:.3g}"
        lines.append(
            f"{CYRILLIC[latin]} ({latin})".ljust(8)
            + f" {mode:<10} {result.verdict:<16} {ratio:>15}  {worst.name if worst else '-'}"
        )
    for (latin, mode), result in session.results.items():
        if result.failed:
            lines.append(f"{CYRILLIC[latin]} ({latin}) {mode}: {result.first_failure}")
            lines.append(f"  rerun: {session.rerun('test_network', networks=latin, mode=mode)}")
    return lines


def evaluations(session: GostSession) -> list[Evaluation]:
    """Section 9.8 for each mode benchmarked in this session, over the system's peak."""
    out = []
    for mode in session.modes:
        if not any(m == mode for _, m in session.benchmarked):
            continue
        results = {
            latin: timing.orp
            for (latin, m), timing in session.timings.items()
            if m == mode and timing.orp is not None
        }
        out.append(evaluate(mode, results, session.system_peak or 0.0))
    return out


def performance_lines(session: GostSession) -> list[str]:
    peak = session.peak
    full = full_profile(session)
    lines = [] if full else [NON_COMPLIANT]
    if peak is None:
        lines.append("no peak: ОРП needs --gost-peak=MAC/s (no estimate for this device)")
    else:
        label = "ESTIMATED " if peak.estimated else ""
        lines.append(f"cell peak ({session.dtype}): {label}{peak.describe()}")
    above = [
        f"{CYRILLIC[latin]} ({latin}) {mode}"
        for (latin, mode), t in session.timings.items()
        if t.orp is not None and t.orp > 100
    ]
    if above:
        lines.append(
            f"ОРП ABOVE 100 % ({', '.join(above)}): a test ran faster than the cell peak, so "
            "the peak is wrong (check --gost-peak) and so is every ОРП below"
        )
    if not session.timings:
        lines.append(
            "nothing was timed: every benchmark was skipped (see the skip reasons: -rs), "
            "e.g. under --benchmark-disable or after a failed verification"
        )
    lines.append(
        f"{'test':<40} {'images':>8} {'time s':>9} {'images/s':>9} {'MAC/s':>10} {'ОРП %':>7}"
    )
    for (latin, mode), t in session.timings.items():
        orp = "-" if t.orp is None else f"{t.orp:.3g}"
        lines.append(
            f"{designate_test(latin, mode, t.dtype, t.batch, t.compliant):<40} {t.images:>8} "
            f"{t.seconds:>9.3g} {t.images / t.seconds:>9.3g} {si(t.macs_per_second):>9}  {orp:>6}"
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
    for evaluation in evaluations(session):
        designation = designate_evaluation(
            evaluation.mode, session.dtype, session.batch, session.cells.size, full
        )
        lines.append(f"evaluation {designation}:")
        lines += [f"  {line}" for line in describe(evaluation)]
        lines += [f"  {line}" for line in comment(session, evaluation)]
    return lines


def comment(session: GostSession, evaluation: Evaluation) -> list[str]:
    """The comment sections 9.7 and 9.8 ask for beside the results."""
    peak = session.peak
    peak_text = (
        "unknown"
        if peak is None
        else (
            f"{si(peak.macs_per_second)}MAC/s" + (" (estimated)" if peak.estimated else " (given)")
        )
    )
    dropped = (
        f"{CYRILLIC[evaluation.dropped]} ({evaluation.dropped}), "
        f"{evaluation.results[evaluation.dropped]:.3g}%"
        if evaluation.dropped
        else "none (incomplete)"
    )
    if session.cells.size > 1:
        cells = f"{session.cells.size} identical cells, one MPI rank each"
        unused = "everything outside these cells"
    else:
        cells = f"1 ({session.device})"
        unused = "everything outside this cell"
    return [
        f"comment: data type {session.dtype}; computing cells: {cells}; not used: {unused}",
        f"comment: dropped test {dropped}; cell peak {peak_text}",
        f"comment: software {software(session)}",
    ]


def software(session: GostSession) -> str:
    parts = [f"Python {platform.python_version()}"]
    parts += [f"{package} {number}" for package, number in libraries().items()]
    parts.append(f"backend {session.backend_name} {type(session.backend).version}")
    return ", ".join(parts)


def full_profile(session: GostSession) -> bool:
    """Every timing ran the 1,000,000 images per cell of section 9.3."""
    return bool(session.timings) and all(t.compliant for t in session.timings.values())


def compliant(session: GostSession, evaluated: list[Evaluation]) -> bool:
    """A result a certifying body may take: full profile, complete evaluations, no failure."""
    no_failures = all(not report["failures"] for report in session.cell_reports)
    complete = bool(evaluated) and all(e.complete for e in evaluated)
    return full_profile(session) and complete and no_failures
