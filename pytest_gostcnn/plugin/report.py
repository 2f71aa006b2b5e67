"""``--gost-report=PATH``: the JSON report a certifying body can check.

It holds the system, the options, every verdict with its СКО values, every timing, every
ОРП with the factors of the peak, and the evaluation. ``docs/report.schema.json`` is its
schema. The file is written to a temporary name in the same folder and renamed, so a
report on disk is always whole.
"""

from __future__ import annotations

import json
import math
import os
import platform
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_gostcnn.conformance.verification import Verification
from pytest_gostcnn.machine.facts import cpu_model, libraries
from pytest_gostcnn.model.network import CYRILLIC
from pytest_gostcnn.performance.evaluation import designate_evaluation, designate_test

from .summary import comment, compliant, evaluations, full_profile

if TYPE_CHECKING:
    from .session import GostSession

FORMAT = "pytest-gostcnn report 1"


def build_report(session: GostSession) -> dict:
    backend = session.backend
    evaluated = evaluations(session) if backend is not None else []
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
                **session.system,  # the backend's own facts first: they cannot replace ours
                "name": session.backend_name,
                "version": type(backend).version if backend else None,
                "device": session.device,
                "unavailable": session.unavailable,
            },
        },
        "options": {
            "backend": session.backend_name,
            "dtype": session.dtype,
            "batch": session.batch,
            "modes": list(session.modes),
            "networks": list(session.networks),
            "seed": session.seed,
            "tables": session.tables,
            "tables_provenance": sorted({n.provenance for n in session.networks.values()}),
            "rmse_threshold": session.threshold,
            "profile": session.profile,
            "local_cell": session.local_cell,
        },
        "exit_status": session.exitstatus,
        "compliant": compliant(session, evaluated),
        "cells": session.cell_reports,
        "peak": session.peak.as_dict() if session.peak else None,
        "verification": {
            "layers": [_verification(v) for v in session.layer_results],
            "networks": [
                {"network": latin, "letter": CYRILLIC[latin], "mode": mode, **_verification(v)}
                for (latin, mode), v in session.results.items()
            ],
        },
        "benchmarks": [
            {
                "network": t.latin,
                "letter": CYRILLIC[t.latin],
                "mode": t.mode,
                "designation": designate_test(t.latin, t.mode, t.dtype, t.batch, t.compliant),
                "compliant": t.compliant,
                "batch": t.batch,
                "images": t.images,
                "rounds": t.rounds,
                "seconds": t.seconds,
                "macs_per_image": t.macs_per_image,
                "macs_per_second": t.macs_per_second,
                "peak_macs_per_second": t.peak_macs_per_second,
                "orp_percent": t.orp,
                "cells": [
                    {
                        "cell": c.cell,
                        "device": c.device,
                        "images": c.images,
                        "seconds": c.seconds,
                        "round_seconds": {
                            "min": min(c.round_seconds),
                            "mean": c.seconds / len(c.round_seconds),
                            "max": max(c.round_seconds),
                        },
                        "first_image_crc32": c.first_image,
                        "orp_percent": t.cell_orp(c),
                    }
                    for c in t.cells
                ],
            }
            for t in session.timings.values()
        ],
        "evaluations": [
            {
                "mode": e.mode,
                "designation": designate_evaluation(
                    e.mode, session.dtype, session.batch, session.cells.size, full_profile(session)
                ),
                "cells": session.cells.size,
                "results_percent": dict(e.results),
                "missing": list(e.missing),
                "complete": e.complete,
                "dropped": e.dropped,
                "first_result_percent": e.first,
                "second_result_macs_per_second": e.second,
                "comment": comment(session, e),
            }
            for e in evaluated
        ],
    }


def _verification(result: Verification) -> dict:
    return {
        "subject": result.subject,
        "verdict": result.verdict,
        "error": result.error,
        "checks": [
            {
                "array": c.name,
                "rmse": c.rmse,
                "admissible_rmse": c.admissible,
                "ratio": None if math.isinf(c.ratio) else c.ratio,
                "problem": c.problem,
            }
            for c in result.checks
        ],
    }


TEMPORARY_PREFIX = ".gost-report."  # short: a long report name must still fit beside it


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
    handle, temporary = tempfile.mkstemp(prefix=TEMPORARY_PREFIX, dir=path.parent)
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
