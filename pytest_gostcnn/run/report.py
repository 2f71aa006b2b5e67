"""The report of a run (``--gost-report=PATH``: the JSON report a certifying body can check),
built in memory on every run and judged there, written or not.

It holds the system, the options, every verdict with its СКО values, every timing, every
ОРП with the factors of the peak, and the evaluation. ``reports/report.schema.json`` is its
schema. The run's conclusion takes the one road every judgement takes: the measured report
-> ``judgement.findings`` -> ``judge`` -> the judged fields. The file is written to a
temporary name in the same folder and renamed, so a report on disk is always whole.
"""

from __future__ import annotations

import json
import platform
from datetime import UTC, datetime
from pathlib import Path

from pytest_gostcnn.judgement import findings, judge, judged
from pytest_gostcnn.machine.facts import cpu_model, libraries
from pytest_gostcnn.machine.threads import cell_cores
from pytest_gostcnn.model.dtypes import master_dtype
from pytest_gostcnn.model.network import CYRILLIC, table_checksum
from pytest_gostcnn.reports.compare import compare
from pytest_gostcnn.reports.files import write_atomically
from pytest_gostcnn.reports.load import FORMAT  # the format written (and read back)
from pytest_gostcnn.reports.paired import LEVEL

from . import outcome
from .option_parsers import REPORT_TEMPORARY_PREFIX
from .options import Options
from .resolution import Resolved, layer_item_id, layer_params
from .results import Conclusion, Results


def configuration_fields(options: Options, resolved: Resolved) -> dict:
    """The report's system, options and peak: all ``reports.load.configuration`` reads, so
    ``--gost-resume`` compares this session with a report before anything runs."""
    layer_ids = [
        layer_item_id(case, step, options.dtype)
        for case, step in layer_params(options, resolved.networks)
    ]
    return {
        "system": {
            "cpu_model": cpu_model(),
            "cpu_cores": cell_cores(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "libraries": libraries(),
            "backend": {
                **resolved.system,  # the backend's own facts first: they cannot replace ours
                "name": resolved.backend_name,
                "version": resolved.version,
                "device": resolved.device,
                "unavailable": resolved.unavailable,
            },
        },
        "options": {
            "backend": options.backend,
            "backend_options": options.backend_options,
            "dtype": options.dtype,
            "batch": options.batch,
            "modes": list(options.modes),
            "networks": list(resolved.networks),
            "seed": options.seed,
            "tables": options.tables,
            "table_set": resolved.table_set,
            "tables_provenance": sorted({n.provenance for n in resolved.networks.values()}),
            "table_checksums": {
                latin: table_checksum(network) for latin, network in resolved.networks.items()
            },
            "tables_held": resolved.tables_held,
            "layer_items": len(layer_ids),
            "layer_item_ids": layer_ids,
            "cells": resolved.cells.size,
            "weights": options.weights,
            "master_dtype": master_dtype(options.dtype),
            "provenance": {latin: p.as_dict() for latin, p in resolved.provenances.items()},
            "rmse_threshold": options.rmse_threshold,
            # One of the two chose the rounds; the other is null.
            "profile": options.profile if options.images is None else None,
            "images": options.images,
            "local_cell": resolved.local_cell,
            "allow_unavailable": options.allow_unavailable,
        },
        "peak": resolved.peak.as_dict() if resolved.peak else None,
        "invocation": resolved.invocation,
    }


def conclude(
    options: Options,
    resolved: Resolved,
    results: Results,
    statuses: list[tuple[int, str | None]],
    state: dict,
    ended: bool = True,
) -> tuple[Conclusion, dict]:
    """The run judged, with the system's exit status among its cells' ``statuses`` (and,
    once it ended, ``--gost-compare``'s gate), and its whole report.

    ``state`` says how far the run got (``outcome.run_state``); a report of a run not ended
    (a checkpoint, ``ended`` False) has no exit status yet and says so.
    """
    status, reason = outcome.system_exit(statuses, results.reported.cell_reports)
    comparison = None
    undecided: list[str] = []
    both = results.earlier.baseline is not None and options.versus is not None
    if ended and results.earlier.baseline is not None:
        path, then = results.earlier.baseline
        comparison = compare(path, then, results.timings.values(), options.compare_fail)
        status, reason = outcome.gated(status, reason, comparison)
        undecided += [f"{'the report gate: ' * both}{u}" for u in comparison.undecided()]
    if ended and options.versus is not None:
        verdicts = list(results.versus.verdicts.values())
        status, reason = outcome.paired_gated(status, reason, verdicts, options.versus)
        undecided += [
            f"{'the paired gate: ' * both}{v.test} ({v.not_compared})"
            for v in verdicts
            if v.not_compared
        ]
        if not verdicts and results.outcomes.by_item and not results.selection.benchmarks:
            undecided.append("any test: no benchmark test was selected (-k)")
    if options.compare_fail is not None:  # a gate was asked for
        status, reason = outcome.undecided(status, reason, undecided)
    measured = measured_report(
        options,
        resolved,
        results,
        state,
        int(status) if ended else None,
        reason if ended else _in_progress(state),
    )
    judgement = judge(findings(measured))
    conclusion = Conclusion(
        judgement.compliance, judgement.timings, judgement.evaluations, status, reason, comparison
    )
    return conclusion, judged(measured, judgement)


def measured_report(
    options: Options,
    resolved: Resolved,
    results: Results,
    state: dict,
    exit_status: int | None,
    exit_reason: str | None,
) -> dict:
    """The report of a session before it is judged: what was measured and stated, with each
    result's own report form, and the judged fields still empty (``judgement.judged``
    fills them, each in its place).

    ``state`` says how far the run got (``outcome.run_state``); ``exit_status`` None: the run
    has not ended (a checkpoint), and ``exit_reason`` says how far it is.
    """
    head = configuration_fields(options, resolved)
    return {
        "format": FORMAT,
        "standard": "GOST R 57700.36-2021",
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "system": head["system"],
        "options": head["options"],
        "invocation": head["invocation"],
        "reference": {
            **resolved.reference.as_dict(),
            "agreement": resolved.agreement.as_dict() if resolved.agreement else None,
        },
        "complete": state["complete"],
        "run": state,
        "exit_status": exit_status,
        "exit_reason": exit_reason,
        "compliant": None,
        "noncompliance_reasons": [],
        "cells": results.reported.cell_reports,
        "peak": head["peak"],
        "verification": {
            "layers": [v.as_dict() for v in results.verified.layers],
            "networks": [
                {"network": latin, "letter": CYRILLIC[latin], "mode": mode, **v.as_dict()}
                for (latin, mode), v in results.verified.networks.items()
            ],
        },
        "benchmarks": [timing.as_dict() for timing in results.timings.values()],
        "evaluations": [],
        **({"versus": _versus(options, resolved, results)} if options.versus else {}),
    }


def _versus(options: Options, resolved: Resolved, results: Results) -> dict:
    """``--gost-versus``'s baseline backend and each test's verdict against it."""
    backend = type(resolved.versus) if resolved.versus is not None else None
    return {
        "backend": options.versus,
        "name": backend.name if backend else None,
        "version": backend.version if backend else None,
        "device": resolved.versus_device,
        "allowed": options.compare_fail,
        "level": LEVEL,
        "holm_tests": max(len(results.selection.benchmarks), len(results.versus.verdicts)),
        "verification": [
            {"network": latin, "mode": mode, "verdict": v.verdict, "passed": not v.failed}
            for (latin, mode), v in results.versus.networks.items()
        ],
        "tests": [verdict.as_dict() for verdict in results.versus.verdicts.values()],
    }


def _in_progress(state: dict) -> str:
    """The exit reason of a report written while the run goes on (a checkpoint)."""
    finished, total = len(state["finished"]), len(state["finished"]) + len(state["unfinished"])
    if state["stopped"]:
        return f"the run stopped after {finished} of {total} performance tests: {state['stopped']}"
    return (
        f"written while the run was going on, after {finished} of {total} performance tests; "
        "the exit status is known when it ends"
    )


def report_written(path: str, report: dict) -> str | None:
    """Write ``report`` to ``--gost-report``'s ``path`` (``write_report``); why it could not
    be written, else None."""
    try:
        write_report(path, report)
    except (OSError, ValueError, TypeError) as exc:  # Value/TypeError: not JSON
        return f"could not write --gost-report={path}: {exc}"
    return None


def write_report(path: str | Path, report: dict) -> None:
    """Write ``report`` as JSON to ``path`` atomically: a temporary file, then a rename."""
    text = json.dumps(report, ensure_ascii=False, indent=2, allow_nan=False)
    write_atomically(path, text + "\n", REPORT_TEMPORARY_PREFIX)
