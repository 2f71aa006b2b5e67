"""Section 8's lines in the terminal summary: what was verified and how, the layer steps,
the computing cells, and the networks' verdicts with a rerun command for each failure."""

from __future__ import annotations

import math
from collections.abc import Callable

from pytest_gostcnn.model.dtypes import master_dtype
from pytest_gostcnn.model.fixed_point import integer_type
from pytest_gostcnn.model.network import CYRILLIC
from pytest_gostcnn.model.table_files import DEFAULT_TABLE_SET

from .options import Options
from .resolution import Resolved
from .results import Results

FAILED_SHOWN = 10  # failed layer items named in the summary; the report has them all


def verification_lines(
    options: Options,
    resolved: Resolved,
    results: Results,
    rerun: Callable[..., str],
    verbosity: int = 0,
) -> list[str]:
    """Section 8's lines; ``verbosity`` as pytest's: below 0 (``-q``), the verdicts only (the
    layer steps', each network's, each failure with its rerun command) and an overridden
    СКОП, without what the header already said or the notes on how the steps were held."""
    tables = "" if resolved.table_set == DEFAULT_TABLE_SET else f"; tables {resolved.table_set}"
    notes = verbosity >= 0
    lines = []
    if notes:
        lines.append(
            f"backend {resolved.backend_label} {resolved.version} on {resolved.device}; "
            f"dtype {options.dtype}; batch {options.batch}; seed {options.seed}; "
            f"weights {options.weights}{tables}"
        )
    master = master_dtype(options.dtype)
    if notes and master != options.dtype and "training" in options.modes:
        lines.append(
            f"training keeps gradients and master weights in {master} and verifies them "
            f"there ({options.dtype} cannot hold section 8's gradients; standard.md §6)"
        )
    if options.rmse_threshold is not None:
        lines.append(
            f"СКОП OVERRIDDEN: --gost-rmse-threshold={options.rmse_threshold:g} admits an СКО "
            "up to that share of each reference array's RMS, instead of the derived СКОП"
        )
    if results.verified.layers:
        failed = [r.subject for r in results.verified.layers if r.failed]
        shaped = sum(1 for r in results.verified.layers if r.rows)
        shown = ", ".join(failed[:FAILED_SHOWN])
        if len(failed) > FAILED_SHOWN:
            shown += f" and {len(failed) - FAILED_SHOWN} more"
        saturating = sum(1 for r in results.verified.layers if "-saturating-" in r.subject)
        small = len(results.verified.layers) - shaped
        lines.append(
            f"layers: {_count(len(results.verified.layers), 'layer step')} verified "
            f"({_count(small, 'small edge case')}"
            + (f", {saturating} of them saturating" if saturating else "")
            + f", {shaped} at the networks' own shapes), {len(failed)} failed"
            + (": " + shown if failed else "")
        )
        if notes and integer_type(options.dtype) is not None:
            lines.append(
                f"  {options.dtype}: a layer step that requantises is held to СКО and to its "
                "mean error (round to nearest); the saturating ones get scales that leave a "
                "tenth of their values past the range (saturate, not wrap): standard.md §6"
            )
    if resolved.cells.size > 1:
        if notes:
            lines.append(f"computing cells: {resolved.cells.size} (one MPI rank each)")
            lines += [
                f"  cell {r['cell']}: {r['host']}: {r['device']}"
                for r in results.reported.cell_reports
            ]
        for report in results.reported.cell_reports:
            lines += [
                f"  cell {report['cell']} failed {item}: {why}" for item, why in report["failures"]
            ]
    if not results.verified.networks:
        return lines
    lines.append(f"{'network':<8} {'mode':<10} {'verdict':<16} {'worst СКО/СКОП':>15}  array")
    for (latin, mode), result in results.verified.networks.items():
        worst = result.worst
        ratio = "-" if worst is None or math.isinf(worst.ratio) else f"{worst.ratio:.3g}"
        lines.append(
            f"{CYRILLIC[latin]} ({latin})".ljust(8)
            + f" {mode:<10} {result.verdict:<16} {ratio:>15}  {worst.name if worst else '-'}"
        )
    for (latin, mode), result in results.verified.networks.items():
        if result.failed:
            lines.append(f"{CYRILLIC[latin]} ({latin}) {mode}: {result.first_failure}")
            lines.append(f"  rerun: {rerun('test_network', networks=latin, mode=mode)}")
    return lines


def _count(number: int, noun: str) -> str:
    """``1 layer step``, ``2 layer steps``."""
    return f"{number} {noun}{'s' * (number != 1)}"
