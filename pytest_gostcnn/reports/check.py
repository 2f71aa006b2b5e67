"""``python -m pytest_gostcnn check REPORT``: every figure of a report recomputed from what
was measured, and each disagreement named.

From the raw round times, the cells' peaks and the tables (found by their checksums) it
recomputes each test's time, MAC/s and ОРП, the system's time over the cells, each cell's
share of its cores taken by other processes (and so whether it was shared), and judges
the report's findings as the plugin does (the compliance conditions, each test's reasons and
designation, each evaluation: the dropped result, the first and second results); it checks
the verdicts against their own СКО and СКОП values, a test kept at a boundary (``run.partial``,
what ``--gost-resume`` continues) against the rounds it claims, and the report against its
schema (docs/report.md); and the paired gate's figures and verdicts (``paired.py``).
Section 9's figures: ``check_tests.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pytest_gostcnn.conformance.verification import PASSED_VERDICTS, REFERENCE_GRADE
from pytest_gostcnn.judgement import findings, judge, judged_fields
from pytest_gostcnn.model.network import Network, TableError, table_checksum
from pytest_gostcnn.model.table_files import USER_TABLES, load_networks
from pytest_gostcnn.performance.designations import benchmark_name

from .agreement import agrees, compare_figures
from .check_tests import check_partial, check_tests
from .load import ReportError, read_report
from .load import timings as report_timings
from .paired import check_versus
from .schema import validate

# What the judge states of each test (``Timing.as_dict``'s judged part), less the comment
# (9.7), which restates the report's system: a copy, not a figure.
JUDGED_TEST_FIELDS = (
    "designation",
    "compliant",
    "noncompliance_reasons",
    "meets_image_count",
    "table_set",
    "requested_images",
)


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
    check_tests(report, timings, networks, found)
    _check_verification(report, found)
    _check_judged(report, judged_fields(judge(findings(report))), found)
    _check_run(report, found)
    check_partial(report, networks, found)
    candidate_rounds = {t.name: list(t.round_seconds) for t in timings.values()}
    found += check_versus(report, candidate_rounds)
    return found


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
    compare_figures(found, "options", options, {"tables_held": len(networks)})
    shipped = options["table_set"] != USER_TABLES
    for latin, stated in options["provenance"].items():
        if latin in networks:
            kind = networks[latin].provenance
            compare_figures(
                found, f"options.provenance.{latin}", stated, {"kind": kind, "shipped": shipped}
            )
    return networks


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
                if not agrees(check["ratio"], ratio):
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


def _check_judged(report: dict, judged: dict, found: list[str]) -> None:
    """The report's judged fields against the judge's own (``judgement.judged_fields``) for
    the report's findings: the plugin wrote them on the same road, so they agree."""
    compare_figures(
        found,
        "report",
        report,
        {key: judged[key] for key in ("compliant", "noncompliance_reasons")},
    )
    tests = {(test["network"], test["mode"]): test for test in judged["benchmarks"]}
    for stated in report["benchmarks"]:
        test = tests[(stated["network"], stated["mode"])]
        compare_figures(
            found,
            f"benchmark {stated['designation']}",
            stated,
            {key: test[key] for key in JUDGED_TEST_FIELDS},
        )
    stated_modes = [e["mode"] for e in report["evaluations"]]
    if len(set(stated_modes)) != len(stated_modes):
        found.append(f"evaluations: a mode appears more than once ({', '.join(stated_modes)})")
        return
    computed = {evaluation["mode"]: evaluation for evaluation in judged["evaluations"]}
    for mode in computed:
        if mode not in stated_modes:
            found.append(f"evaluations: none for {mode}, which has results")
    for stated in report["evaluations"]:
        where = f"evaluation {stated['designation']}"
        evaluation = computed.get(stated["mode"])
        if evaluation is None:
            found.append(f"{where}: {stated['mode']} is not a mode of the run")
        else:
            compare_figures(
                found, where, stated, {k: v for k, v in evaluation.items() if k != "comment"}
            )


def _check_run(report: dict, found: list[str]) -> None:
    state = report["run"]
    ended = report["exit_status"] is not None
    complete = (
        ended
        and state["stopped"] is None
        and not state["unfinished"]
        and not state["other_items_not_run"]
    )
    compare_figures(found, "run", state, {"complete": complete})
    compare_figures(found, "report", report, {"complete": state["complete"]})
    finished = set(state["finished"])
    for stated in report["benchmarks"]:
        name = benchmark_name(stated["network"], stated["mode"], stated["dtype"], stated["batch"])
        if name not in finished:
            found.append(f"run: {name} has a result but is not among the finished tests")
    if set(state["finished"]) & set(state["unfinished"]):
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
            paired = len((report.get("versus") or {}).get("tests", []))
            replayed = (
                f", {paired} paired gate verdict{'s' * (paired != 1)} replayed" if paired else ""
            )
            say(
                f"{path}: every figure agrees ({tests} performance test{'s' * (tests != 1)}, "
                f"{evaluations} evaluation{'s' * (evaluations != 1)}, compliance recomputed"
                f"{replayed})"
            )
    return status
