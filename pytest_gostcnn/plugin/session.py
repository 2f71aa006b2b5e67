"""The plugin object of one pytest run: the options, what they resolved to, every result.

``hooks.py`` registers one ``GostSession`` in ``pytest_configure`` and each hook delegates
to it; the suite's items (``items.py``) add their results to ``GostSession.results``.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_gostcnn.backend import BackendError
from pytest_gostcnn.machine.facts import cpu_model
from pytest_gostcnn.model.network import TableError
from pytest_gostcnn.performance.cells import CellsError, detect
from pytest_gostcnn.performance.evaluation import (
    Evaluation,
    Run,
    compliant,
    evaluate_system,
    software,
)

from . import report, summary
from .options import OPTIONS, Options
from .results import Results
from .setup import Setup, resolve


class GostSession:
    """The options of a run, checked once on first use, and the results its items add."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.results = Results()
        # The suite's side of the network-shape layer case being verified, shared by its
        # steps (items.py).
        self.layer_data: dict[str, object] = {}
        self._options: Options | None = None
        self._setup: Setup | None = None

    @property
    def given(self) -> bool:
        """Whether any ``--gost-*`` option was given: without one the plugin stays silent
        until the suite itself is collected."""
        return any(self.config.getoption(option.dest) is not None for option in OPTIONS)

    @property
    def started(self) -> bool:
        return self._setup is not None

    @property
    def options(self) -> Options:
        self.start()
        return self._options

    @property
    def setup(self) -> Setup:
        return self.start()

    def start(self) -> Setup:
        """Parse the options and resolve them on this machine, once.

        With several cells every rank must reach the same verdict on the options, or the
        ranks would part ways and wait for each other forever: a problem on any cell is a
        usage error on every cell, and a device missing on any cell skips the suite on all.
        """
        if self._setup is not None:
            return self._setup
        try:
            cells = detect()
        except CellsError as exc:
            raise pytest.UsageError(str(exc)) from None
        options, setup, error = None, None, None
        try:
            options = Options.parse(
                {option.name: self.config.getoption(option.dest) for option in OPTIONS}
            )
            setup = resolve(options, cells)
            if cells.size > 1:
                _check_same_items(self.config)
        except BackendError as exc:
            error = f"--gost-backend: {exc}"
        except (TableError, ValueError) as exc:
            error = str(exc)
        errors = [(cell, why) for cell, why in enumerate(cells.allgather(error)) if why]
        if errors:
            cell, why = errors[0]
            raise pytest.UsageError(why if cells.size == 1 else f"cell {cell}: {why}")
        missing = [(c, why) for c, why in enumerate(cells.allgather(setup.unavailable)) if why]
        if missing and setup.unavailable is None:
            setup = setup.without_backend(f"cell {missing[0][0]}: {missing[0][1]}")
        self._options, self._setup = options, setup
        return setup

    # For the items. ------------------------------------------------------------------------

    def rerun(self, keyword: str, **changes: Any) -> str:
        """A command that reruns the items ``keyword`` selects, on this cell's device."""
        changes.setdefault("local_cell", self.setup.local_cell or None)
        return self.options.rerun(keyword, **changes)

    def progress(self, line: str) -> None:
        """A progress line for long benchmarks, shown even while pytest captures output."""
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        capture = self.config.pluginmanager.get_plugin("capturemanager")
        if reporter is None:
            return
        if capture is None:
            reporter.write_line(f"gostcnn: {line}")
            return
        with capture.global_and_fixture_disabled():
            reporter.write_line(f"gostcnn: {line}")

    # What the hooks ask. -------------------------------------------------------------------

    def run(self) -> Run:
        """What the evaluation's comment states about this run."""
        setup, options = self.setup, self.options
        peaks = [cell["peak"] for cell in self.results.cell_reports]
        return Run(
            dtype=options.dtype,
            batch=options.batch,
            cells=setup.cells.size,
            device=setup.device,
            peak=setup.peak,
            system_peak=sum(peaks) if peaks and None not in peaks else None,
            software=software(setup.backend_name, setup.version),
        )

    def evaluations(self) -> list[Evaluation]:
        """Section 9.8 for each mode benchmarked in this session, over the system's peak."""
        if self.setup.backend is None:
            return []
        modes = [m for m in self.options.modes if any(b == m for _, b in self.results.benchmarked)]
        return evaluate_system(modes, self.results.timings.values(), self.run())

    def report_header(self) -> list[str]:
        options, setup = self.options, self.setup
        if setup.backend is None:
            backend = f"{setup.backend_name} (unavailable: {setup.unavailable})"
        else:
            backend = f"{setup.backend_name} {setup.version} on {setup.device}"
        networks = ", ".join(
            f"{n.letter} ({n.latin}, {n.provenance})" for n in setup.networks.values()
        )
        return [
            f"gostcnn: backend {backend}; dtype {options.dtype}; batch {options.batch}; "
            f"mode {'+'.join(options.modes)}; seed {options.seed}; weights {options.weights}",
            f"gostcnn: networks {networks}",
        ]

    def compliant(self, evaluations: list[Evaluation]) -> bool:
        """Whether a certifying body may take this run's evaluations (standard.md §7)."""
        cells_failed = any(cell["failures"] for cell in self.results.cell_reports)
        return compliant(self.results.timings.values(), evaluations, cells_failed)

    def collected(self, item: pytest.Item) -> None:
        if item.get_closest_marker("gost_suite"):
            self.results.suite_items += 1

    def failed(self, item: pytest.Item, report: pytest.TestReport) -> None:
        if report.failed and item.get_closest_marker("gost_suite"):
            self.results.failures.append((item.name, _first_line(report)))

    def finish(self, session: pytest.Session, exitstatus: int) -> None:
        """Gather every cell's facts and failures on cell 0 and write the report there."""
        setup = self.setup
        self.results.exitstatus = int(exitstatus)
        gathered = setup.cells.gather(
            {
                "cell": setup.cells.rank,
                "host": setup.cells.host,
                "cpu_model": cpu_model(),
                "device": setup.device,
                "system": setup.system,
                "peak": setup.peak.macs_per_second if setup.peak else None,
                "failures": self.results.failures,
            }
        )
        if not setup.cells.is_root:
            return
        self.results.cell_reports = gathered
        path = self.options.report
        if path is None:
            return
        try:
            evaluations = self.evaluations()
            whole = report.build_report(
                self.options, setup, self.results, evaluations, self.compliant(evaluations)
            )
            report.write_report(path, whole)
        except (OSError, ValueError, TypeError) as exc:  # Value/TypeError: not JSON
            reporter = self.config.pluginmanager.get_plugin("terminalreporter")
            if reporter is not None:
                reporter.write_line(
                    f"gostcnn: could not write --gost-report={path}: {exc}", red=True
                )
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR

    def terminal_summary(self, reporter: Any) -> None:
        options, setup, results = self.options, self.setup, self.results
        for line in summary.nothing_verified(options, setup, results):
            reporter.write_line(f"gostcnn: {line}", yellow=True, bold=True)
        if not self.results.verified_any:
            return
        reporter.write_sep("=", "GOST R 57700.36-2021, section 8: verification")
        for line in summary.verification_lines(options, setup, results, self.rerun):
            reporter.write_line(line)
        if self.results.benchmarked:
            reporter.write_sep("=", "GOST R 57700.36-2021, section 9: performance")
            lines = summary.performance_lines(options, setup, results, self.evaluations())
            for line in lines:
                reporter.write_line(line)


def _check_same_items(config: pytest.Config) -> None:
    """Options that let one rank run other items than the others are refused under MPI."""
    diverging = [
        flag
        for flag, given in (
            ("-x/--maxfail", config.getoption("maxfail", 0)),
            ("--lf", config.getoption("lf", False)),
            ("--ff", config.getoption("failedfirst", False)),
            ("--sw", config.getoption("stepwise", False)),
        )
        if given
    ]
    if diverging:
        raise ValueError(
            f"{', '.join(diverging)}: with several computing cells every rank must run the "
            "same items (they meet at the same collective calls); drop these options"
        )


def _first_line(report: pytest.TestReport) -> str:
    """The failure in one line for cell 0's summary: its first failure, and its rerun
    command (which names the failing cell's device, ``--gost-local-cell``)."""
    lines = str(report.longrepr).splitlines()
    failure = next((line for line in lines if "first failure:" in line), None)
    rerun = next((line for line in lines if line.startswith("rerun: ")), None)
    text = (failure or str(report.longrepr).strip().splitlines()[-1]).strip()
    return f"{text}; {rerun}" if failure and rerun else text
