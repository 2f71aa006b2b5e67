"""``python -m pytest_gostcnn check REPORT``: every figure of a report recomputed from what
was measured, and each disagreement named.

From the raw round times, the cells' peaks and the tables (found by their checksums) it
recomputes each test's time, MAC/s and ОРП, the system's time over the cells, each cell's
share of its cores taken by other processes (and so whether it was shared), and judges
the report's findings as the plugin does (the compliance conditions, each test's reasons and
designation, each evaluation: the dropped result, the first and second results); it checks
the verdicts against their own СКО and СКОП values, a test kept at a boundary (``run.partial``,
what ``--gost-resume`` continues) against the rounds it claims, and the report against its
schema (docs/report.md).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from pathlib import Path

from pytest_gostcnn.conformance.verification import PASSED_VERDICTS, REFERENCE_GRADE
from pytest_gostcnn.judgement import Assessment, judge
from pytest_gostcnn.model.network import (
    CYRILLIC,
    USER_TABLES,
    Network,
    TableError,
    load_networks,
    table_checksum,
)
from pytest_gostcnn.performance.audit_draw import audited_after
from pytest_gostcnn.performance.contention import Contention
from pytest_gostcnn.performance.designations import benchmark_name
from pytest_gostcnn.performance.evaluation import Evaluation
from pytest_gostcnn.performance.images import ImageSet, image_checksum
from pytest_gostcnn.performance.partial import PartialTest, boundary_rounds
from pytest_gostcnn.performance.plan import WARMUP_ROUNDS, plan
from pytest_gostcnn.performance.timing import Audit, Timing, macs_per_image
from pytest_gostcnn.performance.training_data import training_data

from .load import ReportError, findings, read_report
from .load import timings as report_timings
from .schema import validate

RELATIVE = 1e-9  # figures agree within this share: JSON keeps every float exactly


def check_report(report: dict, tables: str | Path | None = None) -> list[str]:
    """Every disagreement in ``report``, in words (empty: every figure agrees).

    ``tables``: the directory of the tables a report of user tables (``--gost-tables=DIR``)
    was run on; the shipped sets are found by name.
    """
    problems = validate(report)
    if problems:  # the figures below assume the report's shape
        return [f"schema: {problem}" for problem in problems]
    found: list[str] = []
    networks = _tables(report, tables, found)
    timings = report_timings(report)
    _check_tests(report, timings, networks, found)
    _check_verification(report, found)
    assessment = judge(findings(report))
    _check_compliance(report, assessment, found)
    _check_evaluations(report, assessment, found)
    _check_run(report, found)
    _check_partial(report, networks, found)
    return found


def _agrees(stated: object, computed: object) -> bool:
    if isinstance(stated, int | float) and isinstance(computed, int | float):
        if isinstance(stated, bool) or isinstance(computed, bool):
            return stated == computed
        return math.isclose(stated, computed, rel_tol=RELATIVE, abs_tol=0.0)
    return stated == computed


def _compare(found: list[str], where: str, stated: dict, computed: dict) -> None:
    for key, value in computed.items():
        written = stated.get(key)
        if _agrees(written, value):
            continue
        if isinstance(written, list) and isinstance(value, list):  # name what differs
            lacks = [item for item in value if item not in written]
            adds = [item for item in written if item not in value]
            found.append(
                f"{where}: {key} lacks {lacks or 'nothing'} and has {adds or 'nothing'} beyond "
                "what is recomputed"
            )
        else:
            found.append(f"{where}: {key} is {written!r}, recomputed {value!r}")


def _tables(report: dict, directory: str | Path | None, found: list[str]) -> dict[str, Network]:
    """The tables the report's checksums name, or a disagreement saying why not."""
    options = report["options"]
    source = options["table_set"] if options["table_set"] != USER_TABLES else directory
    if source is None:
        found.append(
            "tables: the report was run on a directory of tables (--gost-tables="
            f"{options['tables']}); give it as --tables DIR to check the MACs per image"
        )
        return {}
    try:
        networks = load_networks(source)
    except TableError as exc:
        found.append(f"tables: {exc}")
        return {}
    for latin, checksum in options["table_checksums"].items():
        network = networks.get(latin)
        if network is None:
            found.append(f"tables: {latin} is not in {source}")
        elif table_checksum(network) != checksum:
            found.append(
                f"tables: {latin}'s checksum {checksum} is not that of {source}'s table "
                f"({table_checksum(network)})"
            )
    if sorted(options["table_checksums"]) != sorted(options["networks"]):
        found.append("tables: the checksums do not name exactly the selected networks")
    _compare(found, "options", options, {"tables_held": len(networks)})
    shipped = options["table_set"] != USER_TABLES
    for latin, stated in options["provenance"].items():
        if latin in networks:
            kind = networks[latin].provenance
            _compare(
                found, f"options.provenance.{latin}", stated, {"kind": kind, "shipped": shipped}
            )
    return networks


def _check_peak(peak: dict | None, where: str, found: list[str]) -> None:
    """A peak given by its factors is their product (machine/peak.py)."""
    if peak is None or peak["units"] is None:
        return
    product = peak["units"] * peak["clock_hz"] * peak["macs_per_cycle_per_unit"]
    _compare(found, where, peak, {"macs_per_second": product})


def _check_tests(
    report: dict, timings: dict[tuple[str, str], Timing], networks: dict, found: list[str]
) -> None:
    options = report["options"]
    _check_peak(report["peak"], "peak", found)
    peaks = {cell["cell"]: cell["peak"] for cell in report["cells"]}
    if len(timings) != len(report["benchmarks"]):
        found.append("benchmarks: a test appears more than once")
    for stated in report["benchmarks"]:
        timing = timings[(stated["network"], stated["mode"])]
        where = f"benchmark {stated['designation']}"
        if stated["network"] not in options["networks"] or stated["mode"] not in options["modes"]:
            found.append(f"{where}: not a test of the selected networks and modes")
        for key in ("dtype", "batch"):
            if stated[key] != options[key]:
                found.append(f"{where}: {key} {stated[key]!r}, the run's is {options[key]!r}")
        _compare(found, where, stated, {"requested_images": options["images"]})
        network = networks.get(timing.latin)
        if network is not None:
            _compare(found, where, stated, {"macs_per_image": macs_per_image(network, timing.mode)})
        expected = plan(options["profile"], options["batch"], options["images"])
        _compare(
            found,
            where,
            stated,
            {"meets_image_count": expected.meets_image_count, "rounds": expected.rounds},
        )
        lengths = {len(c.round_seconds) for c in timing.cells}
        if len(lengths) > 1:  # the system's rounds pair the cells' round by round
            found.append(f"{where}: the cells hold {sorted(lengths)} round times, not the same")
            continue
        _compare(
            found,
            where,
            stated,
            {
                "images": timing.images,
                "seconds": timing.seconds,
                "macs_per_second": timing.macs_per_second,
                "peak_macs_per_second": timing.peak_macs_per_second,
                "orp_percent": timing.orp,
            },
        )
        _compare(found, f"{where}, spread", stated.get("spread", {}), timing.spread.as_dict())
        if [c["cell"] for c in stated["cells"]] != list(range(options["cells"])):
            found.append(f"{where}: cells {[c['cell'] for c in stated['cells']]}, not one per cell")
        for cell, written in zip(timing.cells, stated["cells"], strict=True):
            here = f"{where}, cell {cell.cell}"
            if len(cell.round_seconds) != timing.rounds:
                found.append(
                    f"{here}: {len(cell.round_seconds)} round times for {timing.rounds} rounds"
                )
            _compare(
                found,
                here,
                written,
                {
                    "images": timing.rounds * timing.batch,
                    "seconds": cell.seconds,
                    "orp_percent": timing.cell_orp(cell),
                },
            )
            _check_peak(written["peak"], f"{here}, peak", found)
            peak = cell.peak.macs_per_second if cell.peak else None
            if not _agrees(peaks.get(cell.cell), peak):
                found.append(f"{here}: peak {peak!r}, the cell's is {peaks.get(cell.cell)!r}")
            _compare(found, f"{here}, spread", written.get("spread", {}), cell.spread.as_dict())
            _check_contention(here, cell.cell, cell.contention, written, report, found)
            _check_audits(here, cell.audits, timing.rounds, found)


def _check_contention(
    here: str,
    cell: int,
    contention: Contention | None,
    written: dict,
    report: dict,
    found: list[str],
) -> None:
    """A cell's contention counts: its shares and whether the cell was shared, recomputed,
    and cell 0's cores the invocation's (the other cells' are other processes')."""
    if contention is None:
        return
    _compare(found, f"{here}, contention", written["contention"], contention.as_dict())
    cores = report.get("invocation", {}).get("cell_cores")
    if cell == 0 and cores is not None and contention.cores != cores:
        found.append(
            f"{here}: contention counted {contention.cores} cores, the invocation's cell "
            f"has {cores}"
        )


def _check_audits(here: str, audits: tuple[Audit, ...], rounds: int, found: list[str]) -> None:
    """Each audit against its own figures, and its round among the ``rounds`` timed."""
    for audit in audits:
        if audit.passed and audit.worst_ratio is not None and audit.worst_ratio >= 1:
            found.append(
                f"{here}: audit of round {audit.round} passed with СКО/СКОП "
                f"{audit.worst_ratio:g}, not below 1"
            )
        if not audit.passed and audit.failure is None:
            found.append(f"{here}: audit of round {audit.round} failed without a failure")
        if not 1 <= audit.round <= rounds:
            found.append(f"{here}: audited round {audit.round} of {rounds} rounds")
        if audit.passed != (audit.verdict in PASSED_VERDICTS):
            found.append(
                f"{here}: audit of round {audit.round} passed={audit.passed} "
                f"with verdict {audit.verdict!r}"
            )


def _check_verification(report: dict, found: list[str]) -> None:
    ids = report["options"]["layer_item_ids"]
    if report["options"]["layer_items"] != len(ids):
        found.append(
            f"options: layer_items is {report['options']['layer_items']}, the ids name {len(ids)}"
        )
    subjects = [layer["subject"] for layer in report["verification"]["layers"]]
    if len(set(subjects)) != len(subjects):
        found.append("verification: a layer item appears more than once")
    strays = [subject for subject in subjects if subject not in set(ids)]
    if strays:
        found.append(f"verification: {strays[0]} is not a layer item of these options")
    entries = report["verification"]["layers"] + report["verification"]["networks"]
    for entry in entries:
        where = f"verification {entry['subject']}"
        passed = [_passed(check) for check in entry["checks"]]
        for check in entry["checks"]:
            if check["rmse"] is not None and check["problem"] is None and check["rmse"] > 0:
                ratio = (
                    check["rmse"] / check["admissible_rmse"] if check["admissible_rmse"] else None
                )
                if not _agrees(check["ratio"], ratio):
                    found.append(
                        f"{where}, {check['array']}: ratio {check['ratio']!r}, recomputed {ratio!r}"
                    )
        if entry["verdict"] in PASSED_VERDICTS:
            if entry["error"] is not None or not entry["checks"] or not all(passed):
                found.append(
                    f"{where}: verdict {entry['verdict']!r}, but its own СКО values say not "
                    "(an array at or above its СКОП, or an error)"
                )
            grade = all(check["rmse"] == 0 for check in entry["checks"])
            if (entry["verdict"] == REFERENCE_GRADE) != grade:
                found.append(
                    f"{where}: verdict {entry['verdict']!r}, but every СКО being 0 is {grade}"
                )
        elif entry["error"] is None and entry["checks"] and all(passed):
            found.append(
                f"{where}: verdict {entry['verdict']!r}, but every array is below its СКОП"
            )


def _passed(check: dict) -> bool:
    rmse = check["rmse"]
    return (
        check["problem"] is None
        and rmse is not None
        and (rmse == 0 or rmse < check["admissible_rmse"])
    )


def _check_compliance(report: dict, assessment: Assessment, found: list[str]) -> None:
    compliance = assessment.compliance
    _compare(
        found,
        "report",
        report,
        {"compliant": compliance.compliant, "noncompliance_reasons": compliance.texts()},
    )
    judged = {(timing.latin, timing.mode): timing for timing in assessment.timings}
    for stated in report["benchmarks"]:
        timing = judged[(stated["network"], stated["mode"])]
        _compare(
            found,
            f"benchmark {stated['designation']}",
            stated,
            {
                "noncompliance_reasons": list(timing.reasons),
                "compliant": timing.compliant,
                "designation": timing.designation,
            },
        )


def _check_evaluations(report: dict, assessment: Assessment, found: list[str]) -> None:
    stated_modes = [e["mode"] for e in report["evaluations"]]
    if len(set(stated_modes)) != len(stated_modes):
        found.append(f"evaluations: a mode appears more than once ({', '.join(stated_modes)})")
        return
    computed = {evaluation.mode: evaluation for evaluation in assessment.evaluations}
    for mode in computed:
        if mode not in stated_modes:
            found.append(f"evaluations: none for {mode}, which has results")
    for stated in report["evaluations"]:
        where = f"evaluation {stated['designation']}"
        evaluation = computed.get(stated["mode"])
        if evaluation is None:
            found.append(f"{where}: {stated['mode']} is not a mode of the run")
        else:
            _compare(found, where, stated, _figures(evaluation))


def _figures(evaluation: Evaluation) -> dict:
    return {
        "designation": evaluation.designation,
        "cells": evaluation.cells,
        "results_percent": dict(evaluation.results),
        "missing": list(evaluation.missing),
        "complete": evaluation.complete,
        "dropped": evaluation.dropped,
        "first_result_percent": evaluation.first,
        "second_result_macs_per_second": evaluation.second,
        "compliant": evaluation.compliant,
        "noncompliance_reasons": list(evaluation.reasons),
    }


def _check_run(report: dict, found: list[str]) -> None:
    run = report["run"]
    ended = report["exit_status"] is not None
    complete = (
        ended
        and run["stopped"] is None
        and not run["unfinished"]
        and not run["other_items_not_run"]
    )
    _compare(found, "run", run, {"complete": complete})
    _compare(found, "report", report, {"complete": run["complete"]})
    finished = set(run["finished"])
    for stated in report["benchmarks"]:
        name = benchmark_name(stated["network"], stated["mode"], stated["dtype"], stated["batch"])
        if name not in finished:
            found.append(f"run: {name} has a result but is not among the finished tests")
    if set(run["finished"]) & set(run["unfinished"]):
        found.append("run: a test is both finished and not finished")


def first_disagreement(report: dict, tables: str | Path | None = None) -> str | None:
    """None when every figure of ``report`` agrees; else, in one line, its first
    disagreement and how many more there are (for a command that refuses the report)."""
    problems = check_report(report, tables)
    if not problems:
        return None
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"{problems[0]}{more}"


def checked_report(path: str | Path, tables: str | Path | None = None) -> dict:
    """The report at ``path`` when every figure agrees; ReportError naming the file and
    its first disagreement otherwise (``evaluate`` and ``compare`` refuse it)."""
    report = read_report(path)
    why = first_disagreement(report, tables)
    if why is not None:
        raise ReportError(f"{path}: does not check (python -m pytest_gostcnn check): {why}")
    return report


def _check_partial(report: dict, networks: dict[str, Network], found: list[str]) -> None:
    """The test a checkpoint kept at a boundary (``run.partial``): not a result, so nothing
    is judged of it, but ``--gost-resume`` goes on from it, so it must be what a run of
    these options leaves there: a test of the run that has no result, stopped at one of its
    boundaries before its end, each cell with that many round times, audits that a draw of
    the audited rounds can have made up to there (a failed one last), and each cell's first
    image the one its (seed, cell) gives."""
    stored = report["run"].get("partial")
    if stored is None:
        return
    options, run = report["options"], report["run"]
    test = PartialTest.from_dict(stored)
    where = f"run.partial {stored['test']}"
    if test.latin not in options["networks"] or test.mode not in options["modes"]:
        found.append(f"{where}: not a test of the selected networks and modes")
        return
    for key in ("dtype", "batch"):
        if stored[key] != options[key]:
            found.append(f"{where}: {key} {stored[key]!r}, the run's is {options[key]!r}")
    expected = plan(options["profile"], options["batch"], options["images"])
    boundary = boundary_rounds(test.mode, training_data(test.dtype)[0])
    _compare(
        found,
        where,
        stored,
        {
            "test": test.name,
            "letter": CYRILLIC[test.latin],
            "rounds": expected.rounds,
            "boundary_rounds": boundary,
        },
    )
    if not 0 < test.done < test.rounds or test.done % boundary:
        found.append(
            f"{where}: timed round {test.done} of {test.rounds} is not a boundary (every "
            f"{boundary} rounds) before the test's end"
        )
    if test.name in run["finished"] or any(
        (b["network"], b["mode"]) == test.key for b in report["benchmarks"]
    ):
        found.append(f"{where}: the test has a result or finished, yet is kept part-way")
    stopped_in = run["stopped_in"] or {}  # its rounds done stop at a failed audit
    failing = any(not a.passed for cell in test.cells for a in cell.audits)
    later = stopped_in.get("test") == test.name and stopped_in["timed_rounds_done"] < test.done
    if later and not failing:
        found.append(
            f"{where}: kept after timed round {test.done}, yet the run stopped in it after "
            f"{stopped_in['timed_rounds_done']}"
        )
    if [c.cell for c in test.cells] != list(range(options["cells"])):
        found.append(f"{where}: cells {[c.cell for c in test.cells]}, not one per cell")
    network = networks.get(test.latin)
    for cell, written in zip(test.cells, stored["cells"], strict=True):
        here = f"{where}, cell {cell.cell}"
        if len(cell.round_seconds) != test.done:
            found.append(f"{here}: {len(cell.round_seconds)} round times for {test.done} rounds")
        _compare(found, here, written, {"seconds": sum(cell.round_seconds)})
        _check_contention(here, cell.cell, cell.contention, written, report, found)
        _check_audits(here, cell.audits, test.done, found)
        rounds = [a.round for a in cell.audits]
        failed = [n for n, a in enumerate(cell.audits) if not a.passed]
        if rounds != sorted(set(rounds)) or (failed and failed[0] != len(rounds) - 1):
            found.append(f"{here}: audited rounds {rounds}: not in order, once each, failed last")
        elif not failed:
            try:  # the rounds still to run are drawn given these: a draw must allow them
                audited_after(test.rounds, test.done, rounds, random.Random(0))
            except ValueError as exc:
                found.append(f"{here}: {exc}")
        if network is not None:
            images = ImageSet(network.input_shape, options["seed"], cell.cell)
            first = image_checksum(images.image(WARMUP_ROUNDS * test.batch))
            _compare(found, here, written, {"first_image_crc32": first})


# For the command line. -------------------------------------------------------------------


def main(paths: list[str], tables: str | None, say: Callable[[str], None]) -> int:
    """Check each report; 0 only when every figure of every one agrees."""
    status = 0
    for path in paths:
        try:
            report = read_report(path)
        except ReportError as exc:
            say(f"error: {exc}")
            status = 1
            continue
        problems = check_report(report, tables)
        if problems:
            status = 1
            say(f"{path}: {len(problems)} disagreement{'s' if len(problems) > 1 else ''}:")
            for problem in problems:
                say(f"  {problem}")
        else:
            tests = len(report["benchmarks"])
            evaluations = len(report["evaluations"])
            say(
                f"{path}: every figure agrees ({tests} performance test{'s' * (tests != 1)}, "
                f"{evaluations} evaluation{'s' * (evaluations != 1)}, compliance recomputed)"
            )
    return status
