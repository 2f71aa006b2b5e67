"""``--gost-report=PATH``: the JSON report a certifying body can check.

It holds the system, the options, every verdict with its СКО values, every timing, every
ОРП with the factors of the peak, and the evaluation. ``reports/report.schema.json`` is its
schema. The file is written to a temporary name in the same folder and renamed, so a
report on disk is always whole.
"""

from __future__ import annotations

import json
import os
import platform
from datetime import UTC, datetime
from pathlib import Path

from pytest_gostcnn.machine.facts import cpu_model, libraries
from pytest_gostcnn.model.dtypes import master_dtype
from pytest_gostcnn.model.network import CYRILLIC, table_checksum
from pytest_gostcnn.reports.files import write_atomically
from pytest_gostcnn.reports.load import FORMAT  # the format written (and read back)

from .option_parsers import REPORT_TEMPORARY_PREFIX
from .options import Options
from .resolution import Resolved, layer_item_id, layer_params
from .results import Assessment, Results


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
            "cpu_cores": len(os.sched_getaffinity(0)),
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


def build_report(
    options: Options,
    resolved: Resolved,
    results: Results,
    assessment: Assessment,
    run: dict,
    ended: bool = False,
) -> dict:
    """The report of a session: each result's own report form, with the run around them.

    ``run`` says how far the run got (``outcome.run_state``); a report written before
    the run ends (a checkpoint, ``ended`` False: no exit status yet) or of a stopped run
    says so there and in ``complete``.
    """
    head = configuration_fields(options, resolved)
    return {
        "format": FORMAT,
        "standard": "GOST R 57700.36-2021",
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "system": head["system"],
        "options": head["options"],
        "invocation": head["invocation"],
        "complete": run["complete"],
        "run": run,
        "exit_status": int(assessment.exitstatus) if ended else None,
        "exit_reason": assessment.exit_reason if ended else _in_progress(run),
        "compliant": assessment.compliance.compliant,
        "noncompliance_reasons": assessment.compliance.texts(),
        "cells": results.cell_reports,
        "peak": head["peak"],
        "verification": {
            "layers": [v.as_dict() for v in results.layers],
            "networks": [
                {"network": latin, "letter": CYRILLIC[latin], "mode": mode, **v.as_dict()}
                for (latin, mode), v in results.networks.items()
            ],
        },
        "benchmarks": [t.as_dict() for t in assessment.timings],
        "evaluations": [e.as_dict() for e in assessment.evaluations],
    }


def _in_progress(run: dict) -> str:
    """The exit reason of a report written while the run goes on (a checkpoint)."""
    finished, total = len(run["finished"]), len(run["finished"]) + len(run["unfinished"])
    if run["stopped"]:
        return f"the run stopped after {finished} of {total} performance tests: {run['stopped']}"
    return (
        f"written while the run was going on, after {finished} of {total} performance tests; "
        "the exit status is known when it ends"
    )


def write_report(path: str | Path, report: dict) -> None:
    """Write ``report`` as JSON to ``path`` atomically: a temporary file, then a rename."""
    text = json.dumps(report, ensure_ascii=False, indent=2, allow_nan=False)
    write_atomically(path, text + "\n", REPORT_TEMPORARY_PREFIX)
