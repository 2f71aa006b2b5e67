"""``--gost-resume=REPORT``: the finished tests of a stopped run, when the report is of this
very configuration and checks; nothing here imports pytest."""

from __future__ import annotations

from pytest_gostcnn.performance.timing import Timing
from pytest_gostcnn.reports.check import check_report
from pytest_gostcnn.reports.load import ReportError, configuration, differences, read_report
from pytest_gostcnn.reports.load import timings as report_timings

from .options import Options
from .report import configuration_fields
from .resolution import Resolved


def resume(options: Options, resolved: Resolved) -> tuple[dict[tuple[str, str], Timing], dict]:
    """The report's finished tests by (network, mode), and where they came from (its path,
    when it was written, the tests); ValueError listing every difference otherwise."""
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
    problems = check_report(earlier, options.tables if resolved.table_set == "user" else None)
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
    return resumed, source
