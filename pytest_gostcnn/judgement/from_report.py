"""What the judge is given, read from a report: the one builder of ``Findings``.

Every caller judges a report: the plugin the one it builds in memory on every run (written
or not), ``evaluate`` the merged one, ``check`` the one on disk. Only what was measured and
stated is read (the verdicts, the round times, the options, how far the run got); nothing
the judge writes (``judge.judged_fields``) is read back, so a report judged twice is judged
the same.
"""

from __future__ import annotations

from pytest_gostcnn.backend import backend_label
from pytest_gostcnn.machine.peak import Peak
from pytest_gostcnn.performance.designations import benchmark_name
from pytest_gostcnn.performance.timing import Timing

from .compliance import Findings, Provenance
from .evaluation import Particulars, software


def findings(report: dict) -> Findings:
    """What the judge is given, as ``report`` states it (docs/report.md)."""
    options, state = report["options"], report["run"]
    return Findings(
        modes=tuple(options["modes"]),
        profile=options["profile"],
        networks=tuple(options["networks"]),
        tables_held=options["tables_held"],
        verdicts={
            (n["network"], n["mode"]): n["verdict"] for n in report["verification"]["networks"]
        },
        layer_items=options["layer_items"],
        layer_verdicts=tuple(layer["verdict"] for layer in report["verification"]["layers"]),
        threshold=options["rmse_threshold"],
        provenances={
            latin: Provenance(p["kind"], p["shipped"]) for latin, p in options["provenance"].items()
        },
        timings=tuple(Timing.from_dict(test) for test in report["benchmarks"]),
        cell_failures=tuple(
            (cell["cell"], tuple(item for item, _ in cell["failures"]))
            for cell in report["cells"]
            if cell["failures"]
        ),
        particulars=particulars(report),
        evaluated=evaluated(report),
        not_run=(state["other_items_not_run"], list(state["unfinished"])),
        ended=report["exit_status"] is not None,
        images=options["images"],
        versus=(report.get("versus") or {}).get("backend"),
    )


def evaluated(report: dict) -> tuple[str, ...]:
    """The modes evaluated (9.8): those with a performance test that has a result or whose
    item began (``run.began``; in a report that predates it, one that finished or was being
    timed); none where the backend was not there to time."""
    options, state = report["options"], report["run"]
    if report["system"]["backend"]["unavailable"] is not None:
        return ()
    if "began" in state:
        began = set(state["began"])
    else:
        stopped_in = [state["stopped_in"]["test"]] if state["stopped_in"] else []
        began = {*state["finished"], *stopped_in}
    timed = {test["mode"] for test in report["benchmarks"]}
    return tuple(
        mode
        for mode in options["modes"]
        if mode in timed
        or any(
            benchmark_name(latin, mode, options["dtype"], options["batch"]) in began
            for latin in options["networks"]
        )
    )


def particulars(report: dict) -> Particulars:
    """What the comments and designations state of the run (9.7), as the report states it."""
    options, system = report["options"], report["system"]
    backend = system["backend"]
    peaks = [cell["peak"] for cell in report["cells"]]
    return Particulars(
        dtype=options["dtype"],
        batch=options["batch"],
        cells=options["cells"],
        device=backend["device"],
        peak=Peak.from_dict(report["peak"]) if report["peak"] else None,
        system_peak=sum(peaks) if peaks and None not in peaks else None,
        software=software(
            system["python"],
            system["libraries"],
            backend_label(backend["name"], options["backend"]),
            backend["version"],
        ),
        table_set=options["table_set"],
    )
