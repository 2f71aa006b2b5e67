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
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from pytest_gostcnn.machine.facts import cpu_model, libraries
from pytest_gostcnn.model.dtypes import master_dtype
from pytest_gostcnn.model.network import CYRILLIC, table_checksum

from .options import REPORT_TEMPORARY_PREFIX, Options
from .results import Assessment, Results
from .setup import Setup, layer_item_id, layer_params

FORMAT = "pytest-gostcnn report 2"


def build_report(
    options: Options,
    setup: Setup,
    results: Results,
    assessment: Assessment | None,
    run: dict | None = None,
) -> dict:
    """The report of a session: each result's own report form, with the run around them.

    ``run`` says how far the run got (``GostSession.run_state``); a report written before
    the run ends (a checkpoint) or of a stopped run says so there and in ``complete``.
    Without an assessment (``--gost-resume`` comparing configurations) only the system and
    the options are meaningful.
    """
    run = run or {"complete": False, "stopped": None, "finished": [], "unfinished": []}
    final = assessment is not None and run.get("final", False)
    layer_ids = [
        layer_item_id(case, step, options.dtype)
        for case, step in layer_params(options, setup.networks)
    ]
    return {
        "format": FORMAT,
        "standard": "GOST R 57700.36-2021",
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "system": {
            "cpu_model": cpu_model(),
            "cpu_cores": len(os.sched_getaffinity(0)),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "libraries": libraries(),
            "backend": {
                **setup.system,  # the backend's own facts first: they cannot replace ours
                "name": setup.backend_name,
                "version": setup.version,
                "device": setup.device,
                "unavailable": setup.unavailable,
            },
        },
        "options": {
            "backend": options.backend,
            "dtype": options.dtype,
            "batch": options.batch,
            "modes": list(options.modes),
            "networks": list(setup.networks),
            "seed": options.seed,
            "tables": options.tables,
            "table_set": setup.table_set,
            "tables_provenance": sorted({n.provenance for n in setup.networks.values()}),
            "table_checksums": {
                latin: table_checksum(network) for latin, network in setup.networks.items()
            },
            "tables_held": setup.tables,
            "layer_items": len(layer_ids),
            "layer_item_ids": layer_ids,
            "cells": setup.cells.size,
            "weights": options.weights,
            "master_dtype": master_dtype(options.dtype),
            "provenance": {latin: p.as_dict() for latin, p in setup.provenances.items()},
            "rmse_threshold": options.rmse_threshold,
            # One of the two chose the rounds; the other is null.
            "profile": options.profile if options.images is None else None,
            "images": options.images,
            "local_cell": setup.local_cell,
            "allow_unavailable": options.allow_unavailable,
        },
        "complete": run["complete"],
        "run": {key: value for key, value in run.items() if key != "final"},
        "exit_status": int(assessment.exitstatus) if final else None,
        "exit_reason": assessment.exit_reason if final else _in_progress(run),
        "compliant": assessment.compliance.compliant if assessment else False,
        "noncompliance_reasons": assessment.compliance.texts() if assessment else [],
        "cells": results.cell_reports,
        "peak": setup.peak.as_dict() if setup.peak else None,
        "verification": {
            "layers": [v.as_dict() for v in results.layers],
            "networks": [
                {"network": latin, "letter": CYRILLIC[latin], "mode": mode, **v.as_dict()}
                for (latin, mode), v in results.networks.items()
            ],
        },
        "benchmarks": [t.as_dict() for t in assessment.timings] if assessment else [],
        "evaluations": [e.as_dict() for e in assessment.evaluations] if assessment else [],
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


def _mode(path: Path) -> int:
    """The permissions for a report at ``path``: those of the file there, else 0666 less
    the umask (which can only be read by setting it: set back at once; pytest runs this on
    its main thread)."""
    if path.is_file():
        return path.stat().st_mode & 0o777
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask


def write_report(path: str | Path, report: dict) -> None:
    """Write ``report`` as JSON to ``path`` atomically: a temporary file, then a rename."""
    path = Path(path)
    text = json.dumps(report, ensure_ascii=False, indent=2, allow_nan=False)
    handle, temporary = tempfile.mkstemp(prefix=REPORT_TEMPORARY_PREFIX, dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            # mkstemp makes the file private (0600): the report keeps the permissions of
            # the file it replaces, or gets a new file's usual ones.
            os.fchmod(file.fileno(), _mode(path))
            file.write(text + "\n")
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
