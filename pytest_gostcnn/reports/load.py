"""A written report read back: the file, the configuration it was run in, and its tests
(what the judge is given from it: ``judgement.findings``).

``configuration`` names everything a result depends on besides the machine's speed; two
reports of one configuration can be resumed one from the other or merged (docs/report.md).
"""

from __future__ import annotations

import json
from pathlib import Path

from pytest_gostcnn.backend import backend_label
from pytest_gostcnn.machine.threads import THREAD_VARIABLES
from pytest_gostcnn.performance.timing import Timing

# The formats this version reads: the one it writes, and the two before it, read as this
# one (``upgraded``). Format 3 called a round's check an audit (a cell's ``audits`` and
# ``audit_seconds``, the suite's ``audits`` seconds, the reason "not audited"); format 2
# also called a test's ``meets_image_count`` ``full_profile``. A report of format 1 lacks
# the raw round times, so nothing can be recomputed from it.
FORMAT = "pytest-gostcnn report 4"
FORMAT_3, FORMAT_2 = "pytest-gostcnn report 3", "pytest-gostcnn report 2"
FORMATS = (FORMAT, FORMAT_3, FORMAT_2)
# Format 3's words for what format 4 calls checks, in a cell's measurement and in a judged
# reason's text (the judge's words for a test with no checked round).
_FORMAT_3_KEYS = {"audits": "checks", "audit_seconds": "check_seconds"}
_FORMAT_3_WORDS = (("not audited: ", "not checked: "), ("no audited round", "no checked round"))


class ReportError(ValueError):
    """A file that is not a report this version can read; the message names the file."""


def read_report(path: str | Path) -> dict:
    """The report at ``path``; ReportError naming the file and what is wrong."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ReportError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ReportError(f"{path}: is a directory; give a report file") from None
    except OSError as exc:
        raise ReportError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ReportError(f"{path}: not UTF-8 text, so not a --gost-report") from None
    try:
        report = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReportError(
            f"{path}: not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); a report "
            "on disk is always whole, so this is not one"
        ) from None
    if not isinstance(report, dict) or "format" not in report:
        raise ReportError(f'{path}: JSON, but not a --gost-report (no "format")')
    if report["format"] not in FORMATS:
        raise ReportError(
            f"{path}: format {report['format']!r}; this version reads {', '.join(FORMATS)}"
        )
    try:
        return upgraded(report)
    except ReportError as exc:
        raise ReportError(f"{path}: {exc}") from None


def upgraded(report: dict) -> dict:
    """A report of an earlier format this version reads, in the format it writes: a copy,
    its fields and the judge's words renamed, every figure as it was. ReportError where a
    field is there under both its old and its new name."""
    if report.get("format") == FORMAT_2:
        benchmarks = [
            {
                ("meets_image_count" if key == "full_profile" else key): value
                for key, value in test.items()
            }
            for test in report.get("benchmarks", [])
        ]
        report = {**report, "format": FORMAT_3, "benchmarks": benchmarks}
    if report.get("format") == FORMAT_3:
        report = _checks_named(report)
    return report


def _checks_named(report: dict) -> dict:
    """A report of format 3 in format 4: in each test's cells and the partial test's, a
    cell's ``audits`` and ``audit_seconds``; in each cell's ``suite_seconds``, its
    ``audits``; the judge's old words in every ``noncompliance_reasons``. Nothing else is
    renamed: a backend option or an environment variable keeps its name."""

    def cells(test):
        if not isinstance(test, dict) or not isinstance(test.get("cells"), list):
            return test  # not a report's test: the schema says so once it is read
        named = [_renamed(c, _FORMAT_3_KEYS) if isinstance(c, dict) else c for c in test["cells"]]
        return {**test, "cells": named}

    def judged(part):
        reasons = part.get("noncompliance_reasons") if isinstance(part, dict) else None
        if not isinstance(reasons, list):
            return part
        return {**part, "noncompliance_reasons": [_reworded(text) for text in reasons]}

    report = judged({**report, "format": FORMAT})
    report["benchmarks"] = [judged(cells(test)) for test in report.get("benchmarks") or []]
    report["evaluations"] = [judged(e) for e in report.get("evaluations") or []]
    report["cells"] = [
        {**cell, "suite_seconds": _renamed(cell["suite_seconds"], {"audits": "checks"})}
        if isinstance(cell, dict) and isinstance(cell.get("suite_seconds"), dict)
        else cell
        for cell in report.get("cells") or []
    ]
    run = report.get("run")
    if isinstance(run, dict) and isinstance(run.get("partial"), dict):
        report["run"] = {**run, "partial": cells(run["partial"])}
    return report


def _renamed(fields: dict, names: dict[str, str]) -> dict:
    for old, new in names.items():
        if old in fields and new in fields:
            raise ReportError(f"a format 3 report with both {old!r} and {new!r} in one place")
    return {names.get(key, key): value for key, value in fields.items()}


def _reworded(text):
    if isinstance(text, str):
        for old, new in _FORMAT_3_WORDS:
            text = text.replace(old, new)
    return text


# What a configuration holds, in the order differences are listed, with the words for each.
CONFIGURATION = {
    "backend": "backend",
    "backend_version": "backend version",
    "dtype": "data type",
    "batch": "batch",
    "table_set": "table set",
    "tables": "tables (--gost-tables)",
    "table_checksums": "table checksums",
    "seed": "seed",
    "profile": "profile",
    "images": "images per test (--gost-images)",
    "cells": "computing cells",
    "device": "device",
    "backend_options": "backend options (--gost-backend-option)",
    "peak": "cell 0's peak (MAC/s)",
    "weights": "weight reading",
    "rmse_threshold": "СКОП override",
    "networks": "networks",
    "modes": "modes",
    "threads": "thread setup",
    "blas": "BLAS",
}
SELECTION = ("networks", "modes", "table_checksums")  # what merged runs may split


def configuration(report: dict, selection: bool = True) -> dict:
    """What the run of ``report`` depends on besides speed; with ``selection`` False, less
    what the jobs of one merged run divide among themselves (networks, modes, and so the
    checksums of the tables each used)."""
    options, backend = report["options"], report["system"]["backend"]
    values = {
        "backend": backend_label(backend["name"], options["backend"]),
        "backend_version": backend["version"],
        "dtype": options["dtype"],
        "batch": options["batch"],
        "table_set": options["table_set"],
        "tables": options["tables"],
        "table_checksums": options["table_checksums"],
        "seed": options["seed"],
        "profile": options["profile"],
        "images": options.get("images"),
        "cells": options["cells"],
        "device": backend["device"],
        "backend_options": options.get("backend_options", {}),
        "peak": report["peak"]["macs_per_second"] if report["peak"] else None,
        "weights": options["weights"],
        "rmse_threshold": options["rmse_threshold"],
        "networks": options["networks"],
        "modes": options["modes"],
    }
    invocation = report.get("invocation")
    if invocation:  # a report of format 3 before it states neither: nothing to compare
        values["threads"] = thread_setup(invocation)
        values["blas"] = blas_setup(invocation["blas"])
    if not selection:
        values = {key: value for key, value in values.items() if key not in SELECTION}
    return values


def thread_setup(invocation: dict) -> dict:
    """What decides the threads a run ran: each thread variable (None: unset), the cores."""
    environment = invocation["environment"]
    return {
        **{name: environment.get(name) for name in THREAD_VARIABLES},
        "cell cores": invocation["cell_cores"],
    }


def blas_setup(libraries: list[dict]) -> str:
    """Each BLAS library in words: ``openblas 0.3.31 (pthreads, SkylakeX), 1 thread``."""
    if not libraries:
        return "none loaded"
    return "; ".join(
        f"{b['internal_api']} {b['version']} ({b['threading_layer']}, {b['architecture']}), "
        f"{b['threads']} thread{'s' * (b['threads'] != 1)}"
        for b in libraries
    )


def differences(mine: dict, theirs: dict, here: str = "here", there: str = "there") -> list[str]:
    """Each entry of two configurations that differs, in words: "seed: 0 here, 3 there"
    (``here`` and ``there`` name the two: "in a.json"). An entry the other does not state
    (an older report's) is not compared."""
    found = []
    for key in mine:
        if key not in theirs:
            continue
        mine_value, their_value = mine[key], theirs[key]
        if mine_value == their_value:
            continue
        if isinstance(mine_value, dict) and isinstance(their_value, dict):
            # Only the entries that differ (a table in one only is a difference of the
            # networks, listed under its name).
            keys = [k for k in mine_value if k in their_value and mine_value[k] != their_value[k]]
            if not keys:
                continue
            mine_value = {k: mine_value[k] for k in keys}
            their_value = {k: their_value[k] for k in keys}
        found.append(
            f"{CONFIGURATION[key]}: {_show(mine_value)} {here}, {_show(their_value)} {there}"
        )
    return found


def _show(value: object) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_show(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return "none" if value is None else str(value)


def timings(report: dict) -> dict[tuple[str, str], Timing]:
    """The report's performance tests by (network, mode), rebuilt from what was measured."""
    return {(t["network"], t["mode"]): Timing.from_dict(t) for t in report["benchmarks"]}
