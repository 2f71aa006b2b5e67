"""The earlier reports a session reads: ``--gost-resume=REPORT``, the finished tests of a
stopped run and the test it stopped in when a checkpoint kept that one at a boundary, and
``--gost-compare=BASELINE``, the tests this run's ОРП are compared with; each when it is of
this configuration and checks. Nothing here imports pytest."""

from __future__ import annotations

from pytest_gostcnn.performance.partial import PartialTest
from pytest_gostcnn.performance.timing import Timing
from pytest_gostcnn.reports.check import check_report, checked_report
from pytest_gostcnn.reports.compare import configuration_differences
from pytest_gostcnn.reports.load import ReportError, configuration, differences, read_report
from pytest_gostcnn.reports.load import timings as report_timings

from .options import Options
from .report import configuration_fields
from .resolution import Resolved


def resume(
    options: Options, resolved: Resolved
) -> tuple[dict[tuple[str, str], Timing], dict, PartialTest | None]:
    """The report's finished tests by (network, mode), where they came from (its path, when
    it was written, the tests) and the test it stopped in at a boundary, if a checkpoint
    kept one (``run.partial``: ``check`` has found it consistent); ValueError listing every
    difference otherwise."""
    flag = f"--gost-resume={options.resume}"
    if options.report is None:
        raise ValueError(
            f"{flag}: give --gost-report=PATH too (it may be the same file), or the "
            "continued run's results are kept nowhere but the terminal"
        )
    try:
        earlier = read_report(options.resume)
        theirs = configuration(earlier)
    except ReportError as exc:
        raise ValueError(f"--gost-resume: {exc}") from None
    except (KeyError, TypeError) as exc:
        raise ValueError(f"{flag}: not a whole report (no {exc})") from None
    mine = configuration(configuration_fields(options, resolved))
    changed = differences(mine, theirs)
    if changed:
        raise ValueError(
            f"{flag}: the report is of another configuration, so its results cannot "
            "be continued here: " + "; ".join(changed)
        )
    problems = check_report(earlier, _tables(options, resolved))
    if problems:
        raise ValueError(
            f"{flag}: the report does not check (python -m pytest_gostcnn check): "
            + "; ".join(problems[:3])
            + (f"; and {len(problems) - 3} more" if len(problems) > 3 else "")
        )
    resumed = report_timings(earlier)
    source = {
        "path": options.resume,
        "created": earlier["created"],
        "tests": [t.name for t in resumed.values()],
    }
    stored = earlier["run"].get("partial")
    partial = None if stored is None else PartialTest.from_dict(stored)
    if partial is not None:
        source["continued"] = {"test": partial.name, "timed_rounds_kept": partial.done}
    return resumed, source, partial


Baseline = tuple[str, tuple[Timing, ...]]  # --gost-compare's path, and its tests


def baseline(options: Options, resolved: Resolved) -> Baseline | None:
    """``--gost-compare``'s report: its path and tests, when it checks and is of this
    configuration but for the backend's version; ValueError saying why not."""
    if options.compare is None:
        if options.compare_fail is not None and options.versus is None:
            raise ValueError(
                f"--gost-compare-fail={options.compare_fail:g}: give the baseline too, "
                "--gost-versus=BACKEND (timed beside the candidate) or --gost-compare=REPORT"
            )
        return None
    try:
        earlier = checked_report(options.compare, _tables(options, resolved))
    except ReportError as exc:
        raise ValueError(f"--gost-compare: {exc}") from None
    if resolved.backend is not None:  # unavailable here: nothing is timed to compare
        mine = configuration_fields(options, resolved)
        changed = configuration_differences(earlier, mine, "in this run", "in the baseline")
        if changed:
            raise ValueError(
                f"--gost-compare={options.compare}: the baseline is of another configuration, "
                "so its ОРП cannot be compared with this run's: " + "; ".join(changed)
            )
    return options.compare, tuple(report_timings(earlier).values())


def _tables(options: Options, resolved: Resolved) -> str | None:
    """The directory an earlier report of ``--gost-tables=DIR`` is checked against."""
    return options.tables if resolved.table_set == "user" else None
