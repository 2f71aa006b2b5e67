"""Section 9.8: the evaluation of a system over its six tests, its designation, and the
comment of 9.7.

The evaluation drops the single smallest of the six ОРП results and averages the other
five: the first result, in percent; the second result is the first times the system's peak
over 100, in MAC/s (standard.md §7). Whether it is compliant is the judge's (``judge.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pytest_gostcnn.machine.peak import Peak, si
from pytest_gostcnn.model.network import CYRILLIC, LATIN
from pytest_gostcnn.model.table_files import DEFAULT_TABLE_SET
from pytest_gostcnn.performance.designations import MODE_LETTERS, compliance_label


@dataclass(frozen=True)
class Evaluation:
    """Section 9.8 over the six results of one mode; ``first`` is None when any is missing.

    ``designation``, ``comment`` and ``reasons`` are filled by the judge, which knows the run.
    """

    mode: str
    results: Mapping[str, float]  # Latin id -> ОРП in percent
    missing: tuple[str, ...]
    dropped: str | None
    first: float | None  # percent
    second: float | None  # MAC/s
    designation: str = ""
    cells: int = 1
    comment: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()  # why it is not compliant; none: it is
    summary: str = ""  # each kind of reason in a few words, for the evaluation's last line

    @property
    def complete(self) -> bool:
        return not self.missing

    @property
    def compliant(self) -> bool:
        return not self.reasons

    def as_dict(self) -> dict:
        return {
            "mode": self.mode,
            "designation": self.designation,
            "cells": self.cells,
            "results_percent": dict(self.results),
            "missing": list(self.missing),
            "complete": self.complete,
            "dropped": self.dropped,
            "first_result_percent": self.first,
            "second_result_macs_per_second": self.second,
            "comment": list(self.comment),
            "compliant": self.compliant,
            "noncompliance_reasons": list(self.reasons),
        }


def evaluate(mode: str, results: Mapping[str, float], system_peak: float) -> Evaluation:
    """Drop the single smallest of the six ОРП results and average the other five.

    With equal smallest results one of them is dropped (the first in the standard's order
    М, Г, В, С, Р, Ш); the average is the same whichever. With fewer than six results there
    is no score: the evaluation lists what is missing.
    """
    missing = tuple(latin for latin in LATIN.values() if latin not in results)
    ordered = {latin: results[latin] for latin in LATIN.values() if latin in results}
    if missing:
        return Evaluation(mode, ordered, missing, None, None, None)
    dropped = min(ordered, key=ordered.__getitem__)
    kept = [value for latin, value in ordered.items() if latin != dropped]
    first = sum(kept) / len(kept)
    return Evaluation(mode, ordered, (), dropped, first, first * system_peak / 100.0)


@dataclass(frozen=True)
class Particulars:
    """What the comment of 9.7 and 9.8 states beside the results of a run."""

    dtype: str
    batch: int
    cells: int
    device: str | None  # the one cell's device, for a single-cell system
    peak: Peak | None  # one cell's peak
    system_peak: float | None  # the sum of every cell's peak
    software: str
    table_set: str = DEFAULT_TABLE_SET


def software(
    python: str, libraries: Mapping[str, str], backend: str, backend_version: str | None
) -> str:
    """The software particulars of 9.7: Python, the libraries (by version), the backend (its
    name, and ``module:Class`` where given so: ``backend_label``)."""
    parts = [f"Python {python}"]
    parts += [f"{package} {number}" for package, number in libraries.items()]
    parts.append(f"backend {backend} {backend_version}")
    return ", ".join(parts)


def result_comment(particulars: Particulars) -> str:
    """The comment of 9.7 beside one test's result: the data type, the computing cells used
    and what was not used, and one cell's peak with where it came from."""
    peak = particulars.peak
    peak_text = "unknown" if peak is None else f"{si(peak.macs_per_second)}MAC/s ({peak.source})"
    if particulars.cells > 1:
        cells = f"{particulars.cells} identical cells, one MPI rank each"
        unused = "everything outside these cells"
    else:
        cells = f"1 ({particulars.device})"
        unused = "everything outside this cell"
    return (
        f"comment: data type {particulars.dtype}; computing cells: {cells}; not used: {unused}; "
        f"cell peak {peak_text}"
    )


def comment(evaluation: Evaluation, particulars: Particulars) -> list[str]:
    """The comment sections 9.7 and 9.8 ask for beside the evaluation: a test's comment, the
    dropped test and its result, and the software."""
    dropped = (
        f"{CYRILLIC[evaluation.dropped]} ({evaluation.dropped}), "
        f"{evaluation.results[evaluation.dropped]:.3g}%"
        if evaluation.dropped
        else "none (incomplete)"
    )
    return [
        result_comment(particulars),
        f"comment: dropped test {dropped}",
        f"comment: software {particulars.software}",
    ]


def describe(evaluation: Evaluation) -> list[str]:
    """The evaluation's lines: results, dropped test, first and second results."""
    lines = [
        "results (ОРП): "
        + (", ".join(f"{CYRILLIC[k]} {v:.3g}%" for k, v in evaluation.results.items()) or "none")
    ]
    if not evaluation.complete:
        names = ", ".join(f"{CYRILLIC[k]} ({k})" for k in evaluation.missing)
        lines.append(f"incomplete: no result for {names}; no evaluation is computed")
        return lines
    dropped = evaluation.dropped
    lines += [
        f"dropped (smallest): {CYRILLIC[dropped]} ({dropped}) {evaluation.results[dropped]:.3g}%",
        f"first result: {evaluation.first:.3g} %",
        f"second result: {si(evaluation.second)}MAC/s",
    ]
    return lines


def designate_evaluation(
    mode: str,
    dtype: str,
    batch: int,
    cells: int,
    meets_image_count: bool,
    compliant: bool,
    table_set: str = DEFAULT_TABLE_SET,
    images: int | None = None,
) -> str:
    """The designation of an evaluation, e.g. ``ОП-О-float32-B16-N1``."""
    name = f"ОП-{MODE_LETTERS[mode]}-{dtype}-B{batch}-N{cells}"
    return name + compliance_label(meets_image_count, compliant, table_set, images)
