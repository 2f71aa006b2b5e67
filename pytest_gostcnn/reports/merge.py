"""``python -m pytest_gostcnn evaluate REPORT...``: the reports of runs of one configuration
(e.g. six batch jobs, one network each) merged into one run's results and evaluation.

The runs must be of one configuration (``load.configuration`` less the networks and modes
each job chose) on cells of the same peaks; a test in two reports must have the same times
in both (then it counts once). Everything derived is judged anew by the plugin's own judge
(``pytest_gostcnn/judgement/``): compliance, each test's reasons and designation, each
mode's evaluation.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

from pytest_gostcnn.judgement import findings, judge, judged
from pytest_gostcnn.judgement.compliance import Compliance
from pytest_gostcnn.judgement.evaluation import Evaluation
from pytest_gostcnn.model.network import LATIN
from pytest_gostcnn.performance.designations import benchmark_name
from pytest_gostcnn.performance.timing import Timing

from .load import configuration, differences
from .schema import validate

MODES = ("training", "inference")


class MergeError(ValueError):
    """Reports that cannot be merged, with the reason."""


@dataclasses.dataclass(frozen=True)
class Merged:
    report: dict  # the merged report, in the format the plugin writes
    timings: tuple[Timing, ...]
    compliance: Compliance
    evaluations: tuple[Evaluation, ...]
    notes: tuple[str, ...] = ()  # what the merge left out, for the user


def merge_reports(reports: list[tuple[str, dict]]) -> Merged:
    """One run's results from the reports of several: MergeError naming the reports and
    the reason when they are not of one configuration or disagree on a test."""
    for path, report in reports:
        problems = validate(report)
        if problems:
            raise MergeError(f"{path}: not a whole report: {problems[0]}")
    (first_path, first), *others = reports
    mine = configuration(first, selection=False)
    for path, report in others:
        here, there = f"in {first_path}", f"in {path}"
        changed = differences(mine, configuration(report, selection=False), here, there)
        changed += _peaks_differ(first, report, here, there)
        if changed:
            raise MergeError(
                f"{path} is not of the configuration of {first_path}: " + "; ".join(changed)
            )
    tests: dict[tuple[str, str], tuple[str, dict]] = {}
    checksums: dict[str, tuple[str, str]] = {}
    verified: dict[tuple[str, str], tuple[str, dict]] = {}
    for path, report in reports:
        for latin, checksum in report["options"]["table_checksums"].items():
            earlier = checksums.setdefault(latin, (path, checksum))
            if earlier[1] != checksum:
                raise MergeError(
                    f"{latin}'s table differs between {earlier[0]} and {path} (checksums "
                    f"{earlier[1]} and {checksum})"
                )
        for entry in report["benchmarks"]:
            key = (entry["network"], entry["mode"])
            if key in tests and _times(tests[key][1]) != _times(entry):
                raise MergeError(
                    f"{entry['designation']} is in {tests[key][0]} and in {path} with different "
                    "times: one run's result cannot count twice, nor two results once"
                )
            tests.setdefault(key, (path, entry))
        for entry in report["verification"]["networks"]:
            key = (entry["network"], entry["mode"])
            if key in verified and verified[key][1]["verdict"] != entry["verdict"]:
                raise MergeError(
                    f"{entry['subject']} is verified {verified[key][1]['verdict']} in "
                    f"{verified[key][0]} and {entry['verdict']} in {path}"
                )
            verified.setdefault(key, (path, entry))
    merged, notes = _merged_report(reports, tests, checksums, verified)
    judgement = judge(findings(merged))
    return Merged(
        judged(merged, judgement),
        judgement.timings,
        judgement.compliance,
        judgement.evaluations,
        notes,
    )


def _times(entry: dict) -> list:
    return [cell["round_seconds"] for cell in entry["cells"]]


def _peaks_differ(first: dict, report: dict, here: str, there: str) -> list[str]:
    mine = [cell["peak"] for cell in first["cells"]]
    theirs = [cell["peak"] for cell in report["cells"]]
    return [] if mine == theirs else [f"cell peaks (MAC/s): {mine} {here}, {theirs} {there}"]


def _merged_report(
    reports: list[tuple[str, dict]],
    tests: dict[tuple[str, str], tuple[str, dict]],
    checksums: dict[str, tuple[str, str]],
    verified: dict[tuple[str, str], tuple[str, dict]],
) -> tuple[dict, tuple[str, ...]]:
    """The first report with the others' tests, verdicts, layers and selections added, and
    the notes of what it left out."""
    first = reports[0][1]
    networks = [latin for latin in LATIN.values() if latin in checksums]
    modes = [m for m in MODES if any(m in r["options"]["modes"] for _, r in reports)]
    provenance = {}
    for _, report in reports:
        provenance.update(report["options"]["provenance"])
    # A layer item every job has (the small edge cases, a layer two networks share) counts
    # once: the first report's verification of it stands.
    layer_ids = _unique(i for _, r in reports for i in r["options"]["layer_item_ids"])
    layers: dict[str, dict] = {}
    for _, report in reports:
        for layer in report["verification"]["layers"]:
            layers.setdefault(layer["subject"], layer)
    options = {
        **first["options"],
        "networks": networks,
        "modes": modes,
        "table_checksums": {latin: checksums[latin][1] for latin in networks},
        "provenance": {latin: provenance[latin] for latin in networks},
        "tables_provenance": sorted({provenance[latin]["kind"] for latin in networks}),
        "layer_items": len(layer_ids),
        "layer_item_ids": layer_ids,
    }
    cells = [dict(cell, failures=[]) for cell in first["cells"]]
    for cell in cells:
        cell.pop("suite_seconds", None)  # the jobs' own work, summed below where all state it
    for _, report in reports:
        for cell in report["cells"]:
            cells[cell["cell"]]["failures"] += cell["failures"]
    if all("suite_seconds" in cell for _, report in reports for cell in report["cells"]):
        for merged in cells:
            stated = [r["cells"][merged["cell"]]["suite_seconds"] for _, r in reports]
            merged["suite_seconds"] = {kind: sum(s[kind] for s in stated) for kind in stated[0]}
    timed = {
        benchmark_name(e["network"], e["mode"], e["dtype"], e["batch"]) for _, e in tests.values()
    }
    finished = _unique(name for _, r in reports for name in r["run"]["finished"])
    began = _unique(
        name for _, r in reports for name in r["run"].get("began", r["run"]["finished"])
    )
    unfinished = _unique(
        name for _, r in reports for name in r["run"]["unfinished"] if name not in timed
    )
    others = sum(r["run"]["other_items_not_run"] for _, r in reports)
    complete = not unfinished and not others
    partial, notes = _partial(reports, unfinished, finished)
    # A job that stopped is whole once the others finished what it did not: its stop, and
    # the exit status it stopped with, are then no longer the merged run's.
    stopped = (
        None
        if complete
        else next((r["run"]["stopped"] for _, r in reports if r["run"]["stopped"]), None)
    )
    # A job killed after a checkpoint has no exit status; once the others hold what it
    # did not finish, its cells' failures (kept in the report) are what counts of it.
    statuses = [
        (r["exit_status"], r["exit_reason"])
        for _, r in reports
        if not (complete and (r["run"]["stopped"] or r["exit_status"] is None))
    ]
    failing = [(s, why) for s, why in statuses if s != 0]
    status, reason = failing[0] if failing else (0, None)
    if not complete and any(r["exit_status"] is None for _, r in reports):
        status, reason = None, "a merged job had not ended (its report is a checkpoint)"
    order = {(latin, mode): i for i, (latin, mode) in enumerate(
        (latin, mode) for latin in LATIN.values() for mode in MODES
    )}  # fmt: skip
    return {
        **first,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "merged_from": [{"path": path, "created": r["created"]} for path, r in reports],
        "options": options,
        "cells": cells,
        "exit_status": status,
        "exit_reason": reason,
        "complete": complete,
        "run": {
            "complete": complete,
            "stopped": stopped,
            "stopped_in": None,
            "finished": finished,
            "began": began,
            "unfinished": unfinished,
            "other_items_not_run": others,
            "resumed_from": None,
            "partial": partial,
        },
        "verification": {
            "layers": [layers[i] for i in layer_ids if i in layers],
            "networks": [verified[key][1] for key in sorted(verified, key=order.__getitem__)],
        },
        "benchmarks": [tests[key][1] for key in sorted(tests, key=order.__getitem__)],
        "evaluations": [],  # the judge's, as the compliance and each test's judged fields
    }, notes


def _partial(
    reports: list[tuple[str, dict]], unfinished: list[str], finished: list[str]
) -> tuple[dict | None, tuple[str, ...]]:
    """The test a job stopped in part-way (``run.partial``), where no other job finished it:
    the merged run keeps it, so ``--gost-resume`` of the merged report goes on from it. Where
    jobs kept different ones, a run can go on from one only: none is kept, and the note says
    which were left out (the evaluation of the finished tests stands)."""
    kept = [
        (path, p)
        for path, r in reports
        if (p := r["run"].get("partial")) is not None
        and p["test"] in unfinished
        and p["test"] not in finished
    ]
    distinct = [(path, p) for i, (path, p) in enumerate(kept) if p not in [q for _, q in kept[:i]]]
    if len(distinct) > 1:
        named = ", ".join(
            f"{path} ({p['test']}, {p['timed_rounds_done']} rounds)" for path, p in distinct
        )
        note = (
            f"{named} each stopped part-way in a test no other report finished; a run goes "
            "on from one of them only, so the merged report keeps none (resume each job from "
            "its own report, or merge all but one)"
        )
        return None, (note,)
    return (distinct[0][1] if distinct else None), ()


def _unique(names) -> list[str]:
    return list(dict.fromkeys(names))
