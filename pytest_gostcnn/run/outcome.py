"""How a run ends, as rules of what it holds: this cell's exit status and why, how far the run
got (its run state), and what it has not run. Pure functions of the options, what they
resolved to and the run's results; nothing here imports pytest.
"""

from __future__ import annotations

import shlex
from enum import IntEnum

from pytest_gostcnn.performance.designations import benchmark_name
from pytest_gostcnn.reports.compare import FELL, NOT_COMPARED, Comparison
from pytest_gostcnn.reports.paired import Verdict

from .options import Options
from .resolution import Resolved
from .results import Results


class ExitCode(IntEnum):
    """pytest's exit statuses (``pytest.ExitCode``), which this layer may not import."""

    OK = 0
    TESTS_FAILED = 1
    INTERRUPTED = 2
    INTERNAL_ERROR = 3
    USAGE_ERROR = 4
    NO_TESTS_COLLECTED = 5


def stop_reason(exitstatus: int, should_stop: object, should_fail: object) -> str | None:
    """Why pytest stopped before the end of its items, if it did: an interrupt (Ctrl-C, a
    signal), or -x/--maxfail (pytest's ``shouldstop`` / ``shouldfail``)."""
    if exitstatus == ExitCode.INTERRUPTED:
        return "interrupted"
    why = should_stop or should_fail
    return str(why) if why else None


def exit_status(
    exitstatus: int,
    stopped: str | None,
    options: Options,
    resolved: Resolved,
    results: Results,
) -> tuple[int, str | None]:
    """This cell's exit status, and why when the plugin decides it: 0 only when every
    selected item of the suite ran and passed; not 0 when nothing was verified."""
    if results.reported.failure is not None:
        return ExitCode.INTERNAL_ERROR, (
            f"the run stopped at once: {results.reported.failure}; " + _kept(options, results)
        )
    if stopped is not None and results.selection.collected:
        others, tests = not_run(options, results)
        return (exitstatus or ExitCode.INTERRUPTED), (
            f"the run stopped ({stopped}) with {_count(len(tests), 'performance test')} "
            f"and {_count(others, 'other item')} of the suite not run; "
            + (
                "the report keeps the finished tests, "
                f"{_resume_arguments(options.report)} continues the run"
                if options.report
                else "nothing was kept (no --gost-report)"
            )
        )
    if not results.selection.collected:  # the suite was not asked for: pytest's word stands
        return exitstatus, None
    if resolved.backend is None:
        if options.allow_unavailable:
            return exitstatus, (
                f"backend {resolved.backend_label} is unavailable ({resolved.unavailable}); "
                "nothing was verified; --gost-allow-unavailable keeps the exit status"
            )
        return ExitCode.TESTS_FAILED, (
            f"nothing was verified: backend {resolved.backend_label} is unavailable "
            f"({resolved.unavailable}); --gost-allow-unavailable exits 0 for that"
        )
    if not results.selection.selected:
        return (exitstatus or ExitCode.NO_TESTS_COLLECTED), (
            f"nothing was verified: none of the suite's {results.selection.collected} items was "
            "selected (-k, -m, --deselect or --lf)"
        )
    outcomes = [o for node, o in results.outcomes.by_item.items() if node not in results.timed.fell]
    failed, skipped = outcomes.count("failed"), outcomes.count("skipped")
    if results.timed.fell and not failed and not skipped:
        return ExitCode.OK, None  # failed for the baseline alone: ``gated`` says so, exit 6
    if failed:
        return (exitstatus or ExitCode.TESTS_FAILED), (
            f"{failed} of {results.selection.selected} selected items of the suite failed"
        )
    if skipped:
        nothing = "nothing was verified: " if not results.verified.any else ""
        return (exitstatus or ExitCode.TESTS_FAILED), (
            f"{nothing}{skipped} of {results.selection.selected} selected items of the suite were "
            f"skipped (first: {results.outcomes.skips[0]}); exit status 0 needs every one run "
            "and passed"
        )
    return exitstatus, None


def run_state(
    options: Options, results: Results, stopped: str | None = None, ended: bool = True
) -> dict:
    """How far the run got: complete, or where it stopped, and which performance tests
    finished (their items ran, or the resumed report has them) and which did not.
    ``ended`` False: a checkpoint, written while the run goes on, is never complete."""
    others, tests = not_run(options, results)
    finished = [
        benchmark_name(latin, mode, options.dtype, options.batch)
        for node, (latin, mode) in results.selection.benchmarks.items()
        if node in results.outcomes.by_item or (latin, mode) in results.earlier.timings
    ]
    finished += [t.name for t in results.earlier.timings.values() if t.name not in finished]
    began = list(
        dict.fromkeys(
            [
                benchmark_name(latin, mode, options.dtype, options.batch)
                for latin, mode in results.timed.begun
            ]
            + [t.name for t in results.earlier.timings.values()]
        )
    )
    stopped_in = None
    if results.timed.now is not None and (stopped or others or tests):
        name, done, rounds = results.timed.now
        stopped_in = {"test": name, "timed_rounds_done": done, "rounds": rounds}
    partial = results.partial
    return {
        "complete": ended and stopped is None and not others and not tests,
        "stopped": stopped,
        "stopped_in": stopped_in,
        "finished": finished,
        "began": began,
        "unfinished": tests,
        "other_items_not_run": others,
        "resumed_from": results.earlier.source,
        # The test kept at its last boundary, until it runs to its end (docs/report.md).
        "partial": partial.as_dict() if partial and partial.name not in finished else None,
    }


def not_run(options: Options, results: Results) -> tuple[int, list[str]]:
    """The selected items of the suite that have not run: how many outside section 9,
    and the performance tests by name."""
    if results.selection.selected is None:
        return 0, []
    tests = [
        benchmark_name(latin, mode, options.dtype, options.batch)
        for node, (latin, mode) in results.selection.benchmarks.items()
        if node not in results.outcomes.by_item and (latin, mode) not in results.earlier.timings
    ]
    others = sum(
        1
        for node in results.selection.nodes
        if node not in results.outcomes.by_item and node not in results.selection.benchmarks
    )
    return others, tests


def _kept(options: Options, results: Results) -> str:
    """What the report on disk holds after a checkpoint could not be written."""
    kept, path = results.reported.kept, options.report
    if kept is None:
        return f"this run wrote nothing to {path}"
    if not kept:
        return f"{path} keeps no finished performance test, only this run's section 8 so far"
    return (
        f"{path} keeps the {_count(len(kept), 'performance test')} finished before "
        f"({', '.join(kept)}); {_resume_arguments(path)} continues from them"
    )


def _resume_arguments(report: str) -> str:
    """The options that continue a run stopped with ``report``: it is read, then rewritten."""
    return shlex.join([f"--gost-resume={report}", f"--gost-report={report}"])


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def gated(status: int, reason: str | None, comparison: Comparison | None) -> tuple[int, str | None]:
    """The system's exit status with ``--gost-compare-fail``'s gate: a run that would exit 0
    exits ``FELL`` (6) when a test's ОРП fell below the baseline's, saying which; a run
    that fails already keeps its status and says that too."""
    fell = comparison.reason() if comparison is not None else None
    if fell is None:
        return status, reason
    if status == ExitCode.OK:
        return FELL, fell
    return status, f"{reason}; and {fell}" if reason else fell


def paired_gated(
    status: int, reason: str | None, verdicts: list[Verdict], baseline: str
) -> tuple[int, str | None]:
    """The system's exit status with ``--gost-versus``'s gate: a run that would exit 0
    exits ``FELL`` (6) when a test was significantly slower than allowed against the
    ``baseline`` backend, saying which; a run that fails already keeps its status and
    says that too."""
    fell = [v for v in verdicts if v.fell]
    if not fell:
        return status, reason
    line = f"slower than the baseline {baseline}: " + "; ".join(
        f"{v.test} {v.paired.describe()}" for v in fell
    )
    if status == ExitCode.OK:
        return FELL, line
    return status, f"{reason}; and {line}" if reason else line


def undecided(status: int, reason: str | None, tests: list[str]) -> tuple[int, str | None]:
    """A gate never decides nothing in silence: a run that would exit 0 exits
    ``NOT_COMPARED`` (7) when the gate could not compare some of its ``tests`` (each with
    why); any other status keeps its own and says it too."""
    if not tests:
        return status, reason
    line = "the gate decided nothing for " + "; ".join(tests)
    if status == ExitCode.OK:
        return NOT_COMPARED, line
    return status, f"{reason}; and {line}" if reason else line


def system_exit(
    statuses: list[tuple[int, str | None]], cell_reports: list[dict]
) -> tuple[int, str | None]:
    """The system's exit status among its cells' and why: that of the first cell where an
    item failed, else of the first that is not 0."""
    failed = {r["cell"] for r in cell_reports if r["failures"]}
    failing = sorted(
        ((cell, s) for cell, s in enumerate(statuses) if s[0] != 0),
        key=lambda pair: pair[0] not in failed,
    )
    cell, (status, reason) = failing[0] if failing else (0, statuses[0])
    if reason and len(statuses) > 1:
        reason = f"cell {cell}: {reason}"
    return status, reason
