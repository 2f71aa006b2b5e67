"""The plugin object of one pytest run: the options, what they resolved to, every result.

``hooks.py`` registers one ``GostSession`` in ``pytest_configure`` and each hook delegates
to it; the suite's items (``items.py``) add their results to ``GostSession.results``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shlex
import sys
from typing import Any

import pytest

from pytest_gostcnn.backend import BackendError
from pytest_gostcnn.judgement import Findings, judge
from pytest_gostcnn.machine.facts import cpu_model
from pytest_gostcnn.model.network import TableError
from pytest_gostcnn.performance.cells import CellsError, detect
from pytest_gostcnn.performance.designations import benchmark_name
from pytest_gostcnn.performance.estimate import RunEstimate
from pytest_gostcnn.performance.evaluation import Run, software
from pytest_gostcnn.performance.rounds import Plan, plan
from pytest_gostcnn.performance.timing import Timing, macs_per_image
from pytest_gostcnn.reports.check import check_report
from pytest_gostcnn.reports.load import ReportError, configuration, differences, read_report
from pytest_gostcnn.reports.load import timings as report_timings

from . import report, summary
from .benchmark_options import histogram_error, missing_histogram_packages, refused_option
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
        # --gost-resume: the finished tests of the stopped run, not timed again.
        self.resumed: dict[tuple[str, str], Timing] = {}
        self.resumed_from: dict | None = None
        # The performance test timing now, for the summary of a run stopped in it: its name
        # and its Rounds (performance/rounds.py).
        self.timing_now: tuple[str, object] | None = None

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

    @property
    def plan(self) -> Plan:
        """Each benchmark's rounds: from ``--gost-images``, else from the profile."""
        options = self.options
        return plan(options.profile, options.batch, options.images)

    def start(self) -> Setup:
        """Parse the options and resolve them on this machine, once.

        With several cells every rank must reach the same verdict on the options, or the
        ranks would part ways and wait for each other forever: a problem on any cell is a
        usage error on every cell, and a device missing on any cell skips the suite on all.
        """
        if self._setup is not None:
            return self._setup
        _check_one_process(self.config)
        _check_benchmark_options(self.config)
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
            if options.resume is not None:
                self._resume(options, setup)
        except BackendError as exc:
            error = f"--gost-backend: {exc}"
        except (TableError, ValueError) as exc:  # ReportError is a ValueError
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

    def _resume(self, options: Options, setup: Setup) -> None:
        """``--gost-resume``: the finished tests of the report, when it is of this very
        configuration; ValueError listing every difference otherwise."""
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
        mine = configuration(report.configuration_fields(options, setup))
        changed = differences(mine, theirs)
        if changed:
            raise ValueError(
                f"{flag}: the report is of another configuration, so its results cannot "
                "be continued here: " + "; ".join(changed)
            )
        problems = check_report(earlier, options.tables if setup.table_set == "user" else None)
        if problems:
            raise ValueError(
                f"{flag}: the report does not check (python -m pytest_gostcnn check): "
                + "; ".join(problems[:3])
                + (f"; and {len(problems) - 3} more" if len(problems) > 3 else "")
            )
        self.resumed = report_timings(earlier)
        # Kept from the start: a run stopped again before their items, or one that
        # deselects them, must not write a report without them over the earlier one.
        self.results.timings.update(self.resumed)
        self.resumed_from = {
            "path": options.resume,
            "created": earlier["created"],
            "tests": [t.name for t in self.resumed.values()],
        }

    # For the items. ------------------------------------------------------------------------

    def rerun(self, keyword: str, **changes: Any) -> str:
        """A command that reruns the items ``keyword`` selects, on this cell's device."""
        changes.setdefault("local_cell", self.setup.local_cell or None)
        return self.options.rerun(keyword, **changes)

    def progress(self, line: str) -> None:
        """A progress line for long benchmarks, shown even while pytest captures output."""
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            with self._uncaptured():
                reporter.write_line(f"gostcnn: {line}")

    def stalled(self, message: str) -> None:
        """A cell stalled (docs/cells.md): say so, keep the report of the finished tests and
        end every cell's process, the stalled one too, with a status that is not 0."""
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        with self._uncaptured():
            line = f"gostcnn: {message}; ending the job"
            if reporter is None:  # cells other than 0 print nothing else, but this they must
                print(line, file=sys.stderr)
            else:
                reporter.write_line(line, red=True, bold=True)
            self.checkpoint(stopped=message)  # the finished tests, marked incomplete
            if reporter is not None:
                reporter.flush()
            sys.stdout.flush()
            sys.stderr.flush()
        self.setup.cells.abort(pytest.ExitCode.TESTS_FAILED)

    def _uncaptured(self) -> contextlib.AbstractContextManager:
        capture = self.config.pluginmanager.get_plugin("capturemanager")
        return (
            contextlib.nullcontext() if capture is None else capture.global_and_fixture_disabled()
        )

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
        run_plan = self.plan
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
            f"gostcnn: tables {setup.table_set}; networks {networks}",
        ]
        if options.stall_timeout is not None and setup.cells.size == 1:
            lines.append(
                f"gostcnn: --gost-stall-timeout={options.stall_timeout:g} has no effect: one "
                "computing cell waits at no barrier (it watches the cells of an mpirun run)"
            )
        if options.resume is not None:
            kept = ", ".join(t.name for t in self.resumed.values()) or "none"
            lines.append(f"gostcnn: resuming {options.resume}: tests not timed again: {kept}")
        return lines

    def findings(self, ended: bool = True) -> Findings:
        """What the judge is given, gathered from every cell's results (on cell 0)."""
        options, setup, results = self.options, self.setup, self.results
        benchmarked = {mode for _, mode in results.benchmarked}
        benchmarked |= {mode for _, mode in results.timings}  # resumed ones too
        return Findings(
            modes=options.modes,
            profile=options.profile,
            networks=tuple(setup.networks),
            tables=setup.tables,
            verdicts={key: v.verdict for key, v in results.networks.items()},
            layer_items=len(layer_params(options, setup.networks)),
            layer_verdicts=tuple(v.verdict for v in results.layers),
            threshold=options.rmse_threshold,
            provenances=setup.provenances,
            timings=tuple(results.timings.values()),
            cells=setup.cells.size,
            cell_failures=tuple(
                (r["cell"], tuple(item for item, _ in r["failures"]))
                for r in results.cell_reports
                if r["failures"]
            ),
            run=self.run(),
            meets_image_count=self.plan.meets_image_count,
            # Nothing is evaluated where the backend was not there to time.
            evaluated=tuple(
                m for m in options.modes if setup.backend is not None and m in benchmarked
            ),
            table_set=setup.table_set,
            not_run=self.not_run(),
            ended=ended,
            images=options.images,
        )

    def assess(self, statuses: list[tuple[int, str | None]], ended: bool = True) -> Assessment:
        """The session's results judged (standard.md §7.7), with the system's exit status."""
        judged = judge(self.findings(ended))
        status, reason = system_exit(statuses, self.results.cell_reports)
        return Assessment(judged.compliance, judged.timings, judged.evaluations, status, reason)

    def collected(self, item: pytest.Item) -> None:
        if item.get_closest_marker("gost_suite"):
            self.results.suite_items += 1

    def selected(self, items: list[pytest.Item]) -> None:
        """The items left to run once -k, -m, --deselect and --lf have had their say."""
        suite = [i for i in items if i.get_closest_marker("gost_suite")]
        self.results.selected = len(suite)
        self.results.suite_nodes = [i.nodeid for i in suite]
        self.results.benchmark_items = {
            i.nodeid: i.callspec.params["gost_benchmark_case"]
            for i in suite
            if i.get_closest_marker("gost_benchmark") and hasattr(i, "callspec")
        }
        self.estimate = self._run_estimate()

    def _run_estimate(self) -> RunEstimate:
        """The estimate of the selected benchmark tests still to time, in the order they
        will run (a test kept from --gost-resume is not timed again)."""
        networks, run_plan = self.setup.networks, self.plan
        images = (run_plan.rounds + run_plan.warmup_rounds) * run_plan.batch
        tests = []
        for latin, mode in self.results.benchmark_items.values():
            if (latin, mode) in self.resumed:
                continue
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

    def exit_status(self, exitstatus: int, stopped: str | None = None) -> tuple[int, str | None]:
        """This cell's exit status, and why when the plugin decides it: 0 only when every
        selected item of the suite ran and passed; not 0 when nothing was verified."""
        options, setup, results = self.options, self.setup, self.results
        if stopped is not None and results.suite_items:
            not_run, tests = self.not_run()
            return (exitstatus or pytest.ExitCode.INTERRUPTED), (
                f"the run stopped ({stopped}) with {_count(len(tests), 'performance test')} "
                f"and {_count(not_run, 'other item')} of the suite not run; "
                + (
                    f"the report keeps the finished tests, --gost-resume={options.report} "
                    "continues the run"
                    if options.report
                    else "nothing was kept (no --gost-report)"
                )
            )
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
        stopped = _stopped(session, int(exitstatus))
        status, reason = self.exit_status(int(exitstatus), stopped)
        session.exitstatus = status
        gathered = self._gather(status, reason)
        if not setup.cells.is_root:
            return
        self.results.cell_reports = gathered
        assessment = self.assess([(c["exit_status"], c["exit_reason"]) for c in gathered])
        self.results.assessment = assessment
        self.results.stopped = stopped
        session.exitstatus = assessment.exitstatus
        if self.options.report is None:
            return
        whole = report.build_report(
            self.options, setup, self.results, assessment, self.run_state(stopped), ended=True
        )
        why = self._write(whole)
        if why is not None:
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
            self.results.assessment = dataclasses.replace(
                assessment, exitstatus=session.exitstatus, exit_reason=why
            )

    def checkpoint(self, stopped: str | None = None) -> None:
        """The report so far, after every performance test (on every cell: they gather),
        so that a run killed later keeps its finished tests; marked incomplete.

        With ``stopped`` (a cell stalled, cell 0 alone can act) nothing is gathered: the
        cells' facts are those of the last checkpoint.
        """
        if self.options.report is None:
            return
        if stopped is None:
            gathered = self._gather(None, None)
            if not self.setup.cells.is_root:
                return
            self.results.cell_reports = gathered
        elif not self.setup.cells.is_root:
            return
        elif not self.results.cell_reports:
            self.results.cell_reports = [self._cell_report(None, None)]
        statuses = [(0, None)] * len(self.results.cell_reports)
        whole = report.build_report(
            self.options,
            self.setup,
            self.results,
            self.assess(statuses, ended=False),
            self.run_state(stopped, ended=False),
        )
        self._write(whole)

    def run_state(self, stopped: str | None = None, ended: bool = True) -> dict:
        """How far the run got: complete, or where it stopped, and which performance tests
        finished (their items ran, or the resumed report has them) and which did not.
        ``ended`` False: a checkpoint, written while the run goes on, is never complete."""
        options, results = self.options, self.results
        not_run, tests = self.not_run()
        finished = [
            benchmark_name(latin, mode, options.dtype, options.batch)
            for node, (latin, mode) in results.benchmark_items.items()
            if node in results.outcomes or (latin, mode) in self.resumed
        ]
        finished += [t.name for t in self.resumed.values() if t.name not in finished]
        stopped_in = None
        if self.timing_now is not None and (stopped or not_run or tests):
            name, rounds = self.timing_now
            stopped_in = {
                "test": name,
                "timed_rounds_done": rounds.done,
                "rounds": rounds.plan.rounds,
            }
        return {
            "complete": ended and stopped is None and not not_run and not tests,
            "stopped": stopped,
            "stopped_in": stopped_in,
            "finished": finished,
            "unfinished": tests,
            "other_items_not_run": not_run,
            "resumed_from": self.resumed_from,
        }

    def not_run(self) -> tuple[int, list[str]]:
        """The selected items of the suite that have not run: how many outside section 9,
        and the performance tests by name."""
        options, results = self.options, self.results
        if results.selected is None:
            return 0, []
        tests = [
            benchmark_name(latin, mode, options.dtype, options.batch)
            for node, (latin, mode) in results.benchmark_items.items()
            if node not in results.outcomes and (latin, mode) not in self.resumed
        ]
        others = sum(
            1
            for node in results.suite_nodes
            if node not in results.outcomes and node not in results.benchmark_items
        )
        return others, tests

    def _cell_report(self, status: int | None, reason: str | None) -> dict:
        setup = self.setup
        return {
            "cell": setup.cells.rank,
            "host": setup.cells.host,
            "cpu_model": cpu_model(),
            "device": setup.device,
            "system": setup.system,
            "peak": setup.peak.macs_per_second if setup.peak else None,
            "failures": self.results.failures,
            "exit_status": None if status is None else int(status),
            "exit_reason": reason,
        }

    def _gather(self, status: int | None, reason: str | None) -> list[dict] | None:
        """Every cell's facts on cell 0 (a collective call: every cell makes it)."""
        return self.setup.cells.gather(self._cell_report(status, reason))

    def _write(self, whole: dict) -> str | None:
        """Write the report atomically; why it could not be written, else None."""
        path = self.options.report
        try:
            report.write_report(path, whole)
        except (OSError, ValueError, TypeError) as exc:  # Value/TypeError: not JSON
            why = f"could not write --gost-report={path}: {exc}"
            reporter = self.config.pluginmanager.get_plugin("terminalreporter")
            if reporter is not None:
                reporter.write_line(f"gostcnn: {why}", red=True)
            return why
        return None

    def terminal_summary(self, reporter: Any) -> None:
        options, setup, results = self.options, self.setup, self.results
        for line in summary.nothing_verified(options, setup, results):
            reporter.write_line(f"gostcnn: {line}", yellow=True, bold=True)
        if not self.results.verified_any or results.assessment is None:
            return
        state = self.run_state(results.stopped)
        stopped = summary.stopped_lines(state, options.resume)
        if stopped:
            reporter.write_sep("=", "GOST R 57700.36-2021: the run")
        for line in stopped:
            reporter.write_line(line, red=not state["complete"], bold=True)
        reporter.write_sep("=", "GOST R 57700.36-2021, section 8: verification")
        for line in summary.verification_lines(options, setup, results, self.rerun):
            reporter.write_line(line)
        if self.results.benchmarked:
            reporter.write_sep("=", "GOST R 57700.36-2021, section 9: performance")
            assessment = results.assessment
            lines = summary.performance_lines(
                self.plan,
                options.dtype,
                setup.peak,
                setup.table_set,
                assessment.timings,
                assessment.evaluations,
            )
            for line in lines:
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
        state = self.run_state(self.results.stopped)
        if not state["complete"]:
            done = len(state["finished"])
            total = done + len(state["unfinished"])
            why = state["stopped"] or "items not run"
            line = line.replace(
                "GOST R 57700.36-2021: ",
                f"GOST R 57700.36-2021: RUN INCOMPLETE ({why}; {done}/{total} performance tests); ",
                1,
            )
        reporter.write_line(line, green=not failed and assessment.compliance.compliant, bold=True)


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


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _stopped(session: pytest.Session, exitstatus: int) -> str | None:
    """Why pytest stopped before the end of its items, if it did: an interrupt (Ctrl-C, a
    signal), or -x/--maxfail."""
    if exitstatus == pytest.ExitCode.INTERRUPTED:
        return "interrupted"
    why = session.shouldstop or session.shouldfail
    return str(why) if why else None


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


def _check_benchmark_options(config: pytest.Config) -> None:
    """pytest-benchmark's options that the suite's ``benchmark.pedantic`` cannot honour, and
    a histogram without the packages it is drawn with, are refused before anything runs."""
    # Every argument pytest parsed: PYTEST_ADDOPTS, the ini file's addopts, the command line.
    arguments = [
        *shlex.split(os.environ.get("PYTEST_ADDOPTS", "")),
        *config.getini("addopts"),
        *map(str, config.invocation_params.args),
    ]
    refused = refused_option(arguments)
    if refused is not None:
        raise pytest.UsageError(refused)
    if config.getoption("benchmark_histogram", None):
        missing = missing_histogram_packages()
        if missing:
            raise pytest.UsageError(histogram_error(missing))


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
