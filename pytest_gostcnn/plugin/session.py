"""The plugin object of one pytest run: the options, what they resolved to, every result.

``hooks.py`` registers one ``GostSession`` in ``pytest_configure`` and each hook delegates
to it; the suite's items (``items.py``) add their results to ``GostSession.results``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from pytest_gostcnn.backend import BackendError
from pytest_gostcnn.conformance.verification import NOT_CORRECT, NOT_VERIFIED
from pytest_gostcnn.machine.facts import cpu_model
from pytest_gostcnn.model.network import TableError
from pytest_gostcnn.performance.cells import CellsError, detect
from pytest_gostcnn.performance.compliance import Facts, assess
from pytest_gostcnn.performance.estimate import RunEstimate
from pytest_gostcnn.performance.evaluation import Run, evaluate_system, result_comment, software
from pytest_gostcnn.performance.rounds import plan
from pytest_gostcnn.performance.timing import macs_per_image

from . import report, summary
from .options import OPTIONS, Options
from .results import Assessment, Results
from .setup import Setup, layer_params, resolve


class GostSession:
    """The options of a run, checked once on first use, and the results its items add."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.results = Results()
        # The suite's side of the network-shape layer case being verified, shared by its
        # steps (items.py).
        self.layer_data: dict[str, object] = {}
        # The time of the selected benchmark tests, estimated as they run (items.py).
        self.estimate: RunEstimate | None = None
        self._options: Options | None = None
        self._setup: Setup | None = None

    @property
    def given(self) -> bool:
        """Whether any ``--gost-*`` option was given (on the command line or in the ini
        file): without one the plugin stays silent until the suite itself is collected."""
        return any(text is not None for text in option_texts(self.config)[0].values())

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
        _check_one_process(self.config)
        try:
            cells = detect()
        except CellsError as exc:
            raise pytest.UsageError(str(exc)) from None
        options, setup, error = None, None, None
        try:
            options = Options.parse(*option_texts(self.config))
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
            table_set=setup.table_set,
        )

    def report_header(self) -> list[str]:
        options, setup = self.options, self.setup
        if setup.backend is None:
            backend = f"{setup.backend_name} (unavailable: {setup.unavailable})"
        else:
            backend = f"{setup.backend_name} {setup.version} on {setup.device}"
        networks = ", ".join(
            f"{n.letter} ({n.latin}, {setup.provenances[latin].describe()})"
            for latin, n in setup.networks.items()
        )
        threshold = (
            ""
            if options.rmse_threshold is None
            else f"; СКОП OVERRIDDEN: --gost-rmse-threshold={options.rmse_threshold:g}"
        )
        return [
            f"gostcnn: backend {backend}; dtype {options.dtype}; batch {options.batch}; "
            f"mode {'+'.join(options.modes)}; seed {options.seed}; weights {options.weights}; "
            f"profile {options.profile}" + threshold,
            f"gostcnn: tables {setup.table_set}; networks {networks}",
        ]

    def facts(self) -> Facts:
        """What compliance depends on, from every cell's results (on cell 0)."""
        options, setup, results = self.options, self.setup, self.results
        failed = (NOT_CORRECT, NOT_VERIFIED)
        return Facts(
            modes=options.modes,
            profile=options.profile,
            networks=tuple(setup.networks),
            tables=setup.tables,
            verdicts={key: v.verdict for key, v in results.networks.items()},
            failed_verdicts=frozenset(failed),
            layer_items=len(layer_params(options, setup.networks)),
            layers_ran=len(results.layers),
            layers_failed=sum(v.failed for v in results.layers),
            threshold=options.rmse_threshold,
            provenances=setup.provenances,
            timings=tuple(results.timings.values()),
            cells=setup.cells.size,
            cell_failures=tuple(
                (r["cell"], tuple(item for item, _ in r["failures"]))
                for r in results.cell_reports
                if r["failures"]
            ),
            table_set=setup.table_set,
        )

    def assess(self, statuses: list[tuple[int, str | None]]) -> Assessment:
        """The session's results judged (standard.md §7.7), with the system's exit status:
        that of the first cell where an item failed, else of the first that is not 0, and
        why."""
        compliance = assess(self.facts())
        run = self.run()
        timings = tuple(
            dataclasses.replace(
                t,
                reasons=tuple(r.text for r in compliance.for_test(t.latin, t.mode)),
                comment=result_comment(run),
            )
            for t in self.results.timings.values()
        )
        evaluations: list = []
        if self.setup.backend is not None:
            benchmarked = {mode for _, mode in self.results.benchmarked}
            modes = [m for m in self.options.modes if m in benchmarked]
            evaluations = evaluate_system(
                modes, timings, run, compliance, self.options.profile == "full"
            )
        failed = {r["cell"] for r in self.results.cell_reports if r["failures"]}
        failing = sorted(
            ((cell, s) for cell, s in enumerate(statuses) if s[0] != 0),
            key=lambda pair: pair[0] not in failed,
        )
        cell, (status, reason) = failing[0] if failing else (0, statuses[0])
        if reason and len(statuses) > 1:
            reason = f"cell {cell}: {reason}"
        return Assessment(compliance, timings, tuple(evaluations), status, reason)

    def collected(self, item: pytest.Item) -> None:
        if item.get_closest_marker("gost_suite"):
            self.results.suite_items += 1

    def selected(self, items: list[pytest.Item]) -> None:
        """The items left to run once -k, -m, --deselect and --lf have had their say."""
        self.results.selected = sum(1 for i in items if i.get_closest_marker("gost_suite"))
        self.estimate = self._run_estimate(items)

    def _run_estimate(self, items: list[pytest.Item]) -> RunEstimate:
        """The estimate of the selected benchmark tests, in the order they will run."""
        options, networks = self.options, self.setup.networks
        run_plan = plan(options.profile, options.batch)
        images = (run_plan.rounds + run_plan.warmup_rounds) * run_plan.batch
        tests = []
        for item in items:
            if item.get_closest_marker("gost_suite") and item.get_closest_marker("gost_benchmark"):
                latin, mode = item.callspec.params["gost_benchmark_case"]
                network = networks[latin]
                label = f"{network.letter} ({latin}) {mode}"
                tests.append(((latin, mode), label, macs_per_image(network, mode) * images))
        return RunEstimate(tests)

    def reported(self, item: pytest.Item, report: pytest.TestReport) -> None:
        if not item.get_closest_marker("gost_suite"):
            return
        self.results.outcome(item.nodeid, report.when, report.outcome)
        if report.failed:
            self.results.failures.append((item.name, _first_line(report)))
        elif report.skipped:
            self.results.skips.append(_skip_reason(report))

    def exit_status(self, exitstatus: int) -> tuple[int, str | None]:
        """This cell's exit status, and why when the plugin decides it: 0 only when every
        selected item of the suite ran and passed; not 0 when nothing was verified."""
        options, setup, results = self.options, self.setup, self.results
        if not results.suite_items:  # the suite was not asked for: pytest's word stands
            return exitstatus, None
        if setup.backend is None:
            if options.allow_unavailable:
                return exitstatus, (
                    f"backend {setup.backend_name} is unavailable ({setup.unavailable}); "
                    "nothing was verified; --gost-allow-unavailable keeps the exit status"
                )
            return pytest.ExitCode.TESTS_FAILED, (
                f"nothing was verified: backend {setup.backend_name} is unavailable "
                f"({setup.unavailable}); --gost-allow-unavailable exits 0 for that"
            )
        if not results.selected:
            return (exitstatus or pytest.ExitCode.NO_TESTS_COLLECTED), (
                f"nothing was verified: none of the suite's {results.suite_items} items was "
                "selected (-k, -m, --deselect or --lf)"
            )
        outcomes = list(results.outcomes.values())
        failed, skipped = outcomes.count("failed"), outcomes.count("skipped")
        if failed:
            return (exitstatus or pytest.ExitCode.TESTS_FAILED), (
                f"{failed} of {results.selected} selected items of the suite failed"
            )
        if skipped:
            nothing = "nothing was verified: " if not results.verified_any else ""
            return (exitstatus or pytest.ExitCode.TESTS_FAILED), (
                f"{nothing}{skipped} of {results.selected} selected items of the suite were "
                f"skipped (first: {results.skips[0]}); exit status 0 needs every one run "
                "and passed"
            )
        return exitstatus, None

    def finish(self, session: pytest.Session, exitstatus: int) -> None:
        """Gather every cell's facts, failures and exit status on cell 0, judge the results
        there, set the system's exit status and write the report."""
        setup = self.setup
        status, reason = self.exit_status(int(exitstatus))
        session.exitstatus = status
        gathered = setup.cells.gather(
            {
                "cell": setup.cells.rank,
                "host": setup.cells.host,
                "cpu_model": cpu_model(),
                "device": setup.device,
                "system": setup.system,
                "peak": setup.peak.macs_per_second if setup.peak else None,
                "failures": self.results.failures,
                "exit_status": int(status),
                "exit_reason": reason,
            }
        )
        if not setup.cells.is_root:
            return
        self.results.cell_reports = gathered
        assessment = self.assess([(c["exit_status"], c["exit_reason"]) for c in gathered])
        self.results.assessment = assessment
        session.exitstatus = assessment.exitstatus
        path = self.options.report
        if path is None:
            return
        try:
            whole = report.build_report(self.options, setup, self.results, assessment)
            report.write_report(path, whole)
        except (OSError, ValueError, TypeError) as exc:  # Value/TypeError: not JSON
            why = f"could not write --gost-report={path}: {exc}"
            reporter = self.config.pluginmanager.get_plugin("terminalreporter")
            if reporter is not None:
                reporter.write_line(f"gostcnn: {why}", red=True)
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
            self.results.assessment = dataclasses.replace(
                assessment, exitstatus=session.exitstatus, exit_reason=why
            )

    def terminal_summary(self, reporter: Any) -> None:
        options, setup, results = self.options, self.setup, self.results
        for line in summary.nothing_verified(options, setup, results):
            reporter.write_line(f"gostcnn: {line}", yellow=True, bold=True)
        if not self.results.verified_any or results.assessment is None:
            return
        reporter.write_sep("=", "GOST R 57700.36-2021, section 8: verification")
        for line in summary.verification_lines(options, setup, results, self.rerun):
            reporter.write_line(line)
        if self.results.benchmarked:
            reporter.write_sep("=", "GOST R 57700.36-2021, section 9: performance")
            for line in summary.performance_lines(options, setup, results.assessment):
                reporter.write_line(line)
        for line in summary.terms(setup):
            reporter.write_line(line)

    def last_lines(self, reporter: Any) -> None:
        """The run's last lines, after every other summary (pytest-benchmark's table too):
        why the exit status is what it is, and one line of verdicts, as HPL ends."""
        assessment = self.results.assessment
        if assessment is None or not self.results.suite_items:
            return
        failed = assessment.exitstatus != 0
        if assessment.exit_reason:
            reporter.write_line(
                f"gostcnn: exit status {int(assessment.exitstatus)}: {assessment.exit_reason}",
                red=failed,
                yellow=not failed,
                bold=True,
            )
        line = summary.last_line(self.options, self.setup, self.results, assessment)
        reporter.write_line(line, green=not failed and assessment.compliance.compliant, bold=True)


def option_texts(config: pytest.Config) -> tuple[dict[str, str | None], dict[str, str]]:
    """Each option's text, from the command line or else the ini file (None: neither), and
    for a text from the ini file the setting's name, for an error to name."""
    texts, flags = {}, {}
    for option in OPTIONS:
        text = config.getoption(option.dest)
        if text is None:
            setting = config.getini(option.dest)  # None or "" (pytest 8) when not set
            if setting not in (None, ""):
                text, flags[option.name] = str(setting), option.dest
        texts[option.name] = text
    return texts, flags


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


def _check_one_process(config: pytest.Config) -> None:
    """The suite runs in one process per computing cell: pytest-xdist's workers would each
    verify a share of the items, and no process would hold the verdicts, the evaluation or
    the exit status whole."""
    workers = getattr(config.option, "numprocesses", None)
    if getattr(config.option, "dist", "no") != "no" or workers or hasattr(config, "workerinput"):
        raise pytest.UsageError(
            "pytest-xdist (-n, --dist): the GOST suite runs in one process per computing "
            "cell and gathers every verdict there; drop -n (for several cells: mpirun -n N "
            "pytest ..., docs/cells.md)"
        )


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return text.removeprefix("Skipped: ")


def _first_line(report: pytest.TestReport) -> str:
    """The failure in one line for cell 0's summary: its first failure, and its rerun
    command (which names the failing cell's device, ``--gost-local-cell``)."""
    lines = str(report.longrepr).splitlines()
    failure = next((line for line in lines if "first failure:" in line), None)
    rerun = next((line for line in lines if line.startswith("rerun: ")), None)
    text = (failure or str(report.longrepr).strip().splitlines()[-1]).strip()
    return f"{text}; {rerun}" if failure and rerun else text
