"""The lines under pytest's header: the backend and its device, the options, the tables and
networks, the threads; an option that has no effect; what a resumed run keeps."""

from __future__ import annotations

from collections.abc import Sequence

from pytest_gostcnn.backend import backend_label
from pytest_gostcnn.performance.partial import PartialTest
from pytest_gostcnn.performance.plan import Plan
from pytest_gostcnn.performance.timing import Timing
from pytest_gostcnn.reports.load import blas_setup

from .options import Options
from .resolution import Resolved


def header_lines(
    options: Options,
    resolved: Resolved,
    run_plan: Plan,
    resumed: Sequence[Timing],
    partial: PartialTest | None = None,
) -> list[str]:
    """The lines under pytest's header: the backend and its device, the options, the tables
    and networks; an option that has no effect; the tests kept from ``--gost-resume``."""
    if resolved.backend is None:
        backend = f"{resolved.backend_label} (unavailable: {resolved.unavailable})"
    else:
        backend = f"{resolved.backend_label} {resolved.version} on {resolved.device}"
    networks = ", ".join(
        f"{n.letter} ({n.latin}, {resolved.provenances[latin].describe()})"
        for latin, n in resolved.networks.items()
    )
    threshold = (
        ""
        if options.rmse_threshold is None
        else f"; СКОП OVERRIDDEN: --gost-rmse-threshold={options.rmse_threshold:g}"
    )
    count = (
        f"profile {options.profile}"
        if options.images is None
        else f"images {options.images} per test ({run_plan.rounds} rounds of "
        f"{options.batch}; no profile)"
    )
    lines = [
        f"gostcnn: backend {backend}; dtype {options.dtype}; batch {options.batch}; "
        f"mode {'+'.join(options.modes)}; seed {options.seed}; weights {options.weights}; "
        f"{count}" + threshold,
        f"gostcnn: tables {resolved.table_set}; networks {networks}",
    ]
    if resolved.invocation:
        lines.append(threads_line(resolved))
    if options.stall_timeout is not None and resolved.cells.size == 1:
        lines.append(
            f"gostcnn: --gost-stall-timeout={options.stall_timeout:g} has no effect: one "
            "computing cell waits at no barrier (it watches the cells of an mpirun run)"
        )
    if resolved.versus is not None:
        versus = type(resolved.versus)
        rule = (
            f"a test fails when more than {options.compare_fail:g} % slower, significantly"
            if options.compare_fail is not None
            else "nothing fails without --gost-compare-fail"
        )
        named = backend_label(versus.name, options.versus, versus.version)
        lines.append(
            f"gostcnn: paired gate: every benchmark test also on {named} on "
            f"{resolved.versus_device}, round by round; {rule}"
        )
    if options.resume is not None:
        kept = ", ".join(t.name for t in resumed) or "none"
        lines.append(f"gostcnn: resuming {options.resume}: tests not timed again: {kept}")
    if partial is not None:
        lines.append(
            f"gostcnn: resuming {partial.name} after timed round {partial.done} of "
            f"{partial.rounds} (its last checkpoint): those rounds are the stopped run's"
        )
    return lines


def threads_line(resolved: Resolved) -> str:
    """The cell's cores, the backend's threads, BLAS's, the thread settings and the load."""
    invocation = resolved.invocation
    pool = resolved.system.get("threads")
    settings = ", ".join(f"{k}={v}" for k, v in invocation["environment"].items())
    load = invocation["load_average"]
    return (
        f"gostcnn: cell {invocation['cell_cores']} cores"
        + (f"; backend threads {pool}" if pool is not None else "")
        + f"; BLAS {blas_setup(invocation['blas'])}"
        + (f"; {settings}" if settings else "")
        + (f"; load average {load[0]:.2g} at the start" if load else "")
    )
