"""What the session prints through pytest's terminal reporter: the section 8 and 9 summary
after the run, and its last lines after every other summary. The lines themselves are
``run/``'s (``summary.py`` and each section's ``*_summary.py``); this module only places
and colours them."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

from pytest_gostcnn.performance.plan import Plan
from pytest_gostcnn.run import outcome, summary
from pytest_gostcnn.run.comparison_summary import comparison_lines, versus_lines
from pytest_gostcnn.run.options import Options
from pytest_gostcnn.run.performance_summary import performance_lines
from pytest_gostcnn.run.resolution import Resolved
from pytest_gostcnn.run.results import Results
from pytest_gostcnn.run.verification_summary import verification_lines

BENCHMARK_HEADER = "benchmark: "  # pytest-benchmark's header line starts so


def header(lines: list, own: list[str]) -> list:
    """pytest's header (each plugin's lines, printed last first) with the suite's own after
    pytest-benchmark's, whose loop defaults (min_rounds=5, ...) the suite does not use: its
    line keeps the version and the timer and says that instead."""
    for i, entry in enumerate(lines):
        if isinstance(entry, str) and entry.startswith(BENCHMARK_HEADER):
            version = entry.removeprefix(BENCHMARK_HEADER).split(" ", 1)[0]
            timer = re.search(r"timer=(\S+)", entry)
            said = f"{BENCHMARK_HEADER}{version} ({f'timer {timer.group(1)}; ' if timer else ''}"
            said += "its loop's defaults unused: the suite runs its own rounds)"
            return [*lines[:i], own, said, *lines[i + 1 :]]
    return [*lines, own]


def progress(reporter: Any, line: str) -> None:
    """A line while an item runs, on its own line; pytest's line of results (the file and
    its dots, or the item's name) then starts again below it rather than trailing off."""
    written = reporter.currentfspath  # a path (its dots), a verbose item's prefix, or None
    writer = getattr(reporter, "_tw", None)  # -q writes its dots with no path to end
    if not written and getattr(writer, "width_of_current_line", 0):
        reporter.write("\n")
    reporter.write_line(line)
    if written:
        prefix = (
            written
            if isinstance(written, str)
            else os.path.relpath(written, reporter.startpath) + " "
        )
        reporter.write(prefix)
        reporter.currentfspath = written


def terminal_summary(
    reporter: Any,
    options: Options,
    resolved: Resolved,
    results: Results,
    run_plan: Plan,
    rerun: Callable[..., str],
) -> None:
    """The summary: why nothing was verified, or how far the run got, section 8's verdicts,
    section 9's timings and evaluations, and the terms in words; as much as pytest's
    verbosity asks (``-q``: the verdicts and results; docs/benchmarking.md)."""
    for line in summary.nothing_verified(options, resolved, results):
        reporter.write_line(f"gostcnn: {line}", yellow=True, bold=True)
    if not results.verified.any or results.reported.conclusion is None:
        return
    verbosity = reporter.config.get_verbosity()
    if verbosity >= 0:  # the words first: the tables below use them
        reporter.write_sep("=", "GOST R 57700.36-2021: terms")
        for line in summary.terms(resolved, options.modes):
            reporter.write_line(line)
    state = outcome.run_state(options, results, results.reported.stopped)
    stopped = summary.stopped_lines(state, options.resume)
    if stopped:
        reporter.write_sep("=", "GOST R 57700.36-2021: the run")
    for line in stopped:
        reporter.write_line(line, red=not state["complete"], bold=True)
    reporter.write_sep("=", "GOST R 57700.36-2021, section 8: verification")
    for line in verification_lines(options, resolved, results, rerun, verbosity):
        reporter.write_line(line)
    if results.timed.begun:
        reporter.write_sep("=", "GOST R 57700.36-2021, section 9: performance")
        conclusion = results.reported.conclusion
        lines = performance_lines(
            run_plan,
            options.dtype,
            resolved.peak,
            conclusion.compliance,
            conclusion.timings,
            conclusion.evaluations,
            verbosity,
        )
        for line in lines:
            reporter.write_line(line)
    if verbosity >= 0:
        reporter.write_line(summary.suite_time_line(results, resolved.cells.size))
    if results.reported.conclusion.comparison is not None:
        reporter.write_sep("=", "ОРП against the baseline (--gost-compare)")
        for line in comparison_lines(results.reported.conclusion.comparison):
            reporter.write_line(line, red=" FELL (" in line)
    if options.versus is not None and results.versus.verdicts:
        reporter.write_sep("=", "the candidate against the baseline backend (--gost-versus)")
        verdicts = list(results.versus.verdicts.values())
        for line in versus_lines(options.versus, options.compare_fail, verdicts):
            reporter.write_line(line, red=line.endswith("FELL"))


def last_lines(reporter: Any, options: Options, results: Results) -> None:
    """The run's last lines, after every other summary (pytest-benchmark's table too):
    why the exit status is what it is, section 8's verdicts, and a line for each evaluation,
    as HPL ends with a line for each result."""
    conclusion = results.reported.conclusion
    if conclusion is None or not results.selection.collected:
        return
    failed = conclusion.exitstatus != 0
    if conclusion.exit_reason:
        reporter.write_line(
            f"gostcnn: exit status {int(conclusion.exitstatus)}: {conclusion.exit_reason}",
            red=failed,
            yellow=not failed,
            bold=True,
        )
    line = summary.last_line(results, conclusion)
    state = outcome.run_state(options, results, results.reported.stopped)
    if not state["complete"]:
        done = len(state["finished"])
        total = done + len(state["unfinished"])
        why = state["stopped"] or "items not run"
        line = line.replace(
            summary.LAST_LINE_PREFIX,
            f"{summary.LAST_LINE_PREFIX}RUN INCOMPLETE ({why}; {done}/{total} performance tests); ",
            1,
        )
    reporter.write_line(line, green=not failed and conclusion.compliance.compliant, bold=True)
    for evaluation in conclusion.evaluations:
        reporter.write_line(
            summary.evaluation_line(evaluation),
            green=not failed and evaluation.compliant,
            bold=True,
        )
