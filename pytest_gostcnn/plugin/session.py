"""The plugin object of one pytest run, a facade over the run's parts: ``startup`` (the
options parsed and resolved, the cells agreed), ``reporting`` (the report at checkpoints
and at the end, where the run is concluded; ``meeting`` holds where the cells meet),
``rendering`` (the summary); the outcome rules and the lines are in ``run/``.

``hooks.py`` registers one ``GostSession`` in ``pytest_configure`` and each hook delegates
to it; the run's state is ``GostSession.results``, records each written from one module
(``run/results.py``).
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any

import pytest

from pytest_gostcnn.performance.estimate import RunEstimate, check_iterations
from pytest_gostcnn.performance.plan import Plan, plan
from pytest_gostcnn.performance.timing import macs_per_image
from pytest_gostcnn.performance.training_data import training_data
from pytest_gostcnn.run.header import header_lines
from pytest_gostcnn.run.options import Options
from pytest_gostcnn.run.resolution import Resolved
from pytest_gostcnn.run.results import Earlier, Results

from . import rendering, reporting, startup


class GostSession:
    """The options of a run, checked once on first use, what they resolved to on this
    machine, and the run's records (``Results``)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.results = Results()
        self._options: Options | None = None
        self._resolved: Resolved | None = None

    @property
    def given(self) -> bool:
        """Whether any ``--gost-*`` option was given (on the command line or in the ini
        file, a misspelt setting too): without one the plugin stays silent until the suite
        itself is collected."""
        texts = startup.option_texts(self.config)[0].values()
        return any(text is not None for text in texts) or bool(
            startup.unknown_settings(self.config)
        )

    @property
    def started(self) -> bool:
        return self._resolved is not None

    @property
    def options(self) -> Options:
        self.start()
        return self._options

    @property
    def resolved(self) -> Resolved:
        """What the options resolve to on this machine: backend, networks, cells, peak."""
        return self.start()

    @property
    def plan(self) -> Plan:
        """Each benchmark's rounds: from ``--gost-images``, else from the profile."""
        options = self.options
        return plan(options.profile, options.batch, options.images)

    def start(self) -> Resolved:
        """Parse the options and resolve them on this machine, once (``startup.start``)."""
        if self._resolved is not None:
            return self._resolved
        options, resolved, resumed, baseline = startup.start(self.config)
        # Kept from the start (``Results.timings``, ``Results.partial``): a run stopped again
        # before their items, or one that deselects them, must not write a report without
        # them over the earlier one; the test stopped at a boundary goes on from there, and
        # until it does the report keeps it as it was.
        timings, source, partial = resumed if resumed is not None else ({}, None, None)
        self.results.earlier = Earlier(timings, source, partial, baseline)
        self._options, self._resolved = options, resolved
        return resolved

    # For the items. ------------------------------------------------------------------------

    def rerun(self, keyword: str, **changes: Any) -> str:
        """A command that reruns the items ``keyword`` selects, on this cell's device."""
        changes.setdefault("local_cell", self.resolved.local_cell or None)
        return self.options.rerun(keyword, **changes)

    def progress(self, line: str) -> None:
        """A progress line for long benchmarks, shown even while pytest captures output."""
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            with self._uncaptured():
                rendering.progress(reporter, f"gostcnn: {line}")

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
        self.resolved.cells.abort(pytest.ExitCode.TESTS_FAILED)

    def _uncaptured(self) -> contextlib.AbstractContextManager:
        capture = self.config.pluginmanager.get_plugin("capturemanager")
        return (
            contextlib.nullcontext() if capture is None else capture.global_and_fixture_disabled()
        )

    # What the hooks ask. -------------------------------------------------------------------

    def report_header(self) -> list[str]:
        return header_lines(
            self.options,
            self.resolved,
            self.plan,
            list(self.results.earlier.timings.values()),
            self.results.earlier.partial,
        )

    def collected(self, item: pytest.Item) -> None:
        if item.get_closest_marker("gost_suite"):
            self.results.selection.collected += 1

    def selected(self, items: list[pytest.Item]) -> None:
        """The items left to run once -k, -m, --deselect and --lf have had their say."""
        suite = [i for i in items if i.get_closest_marker("gost_suite")]
        results = self.results
        results.selection.selected = len(suite)
        results.selection.nodes = [i.nodeid for i in suite]
        results.selection.benchmarks = {
            i.nodeid: i.callspec.params["gost_benchmark_case"]
            for i in suite
            if i.get_closest_marker("gost_benchmark") and hasattr(i, "callspec")
        }
        params = [i.callspec.params for i in suite if hasattr(i, "callspec")]
        results.selection.layer_steps = sum("gost_layer_case" in p for p in params)
        results.selection.networks = {
            p[name]
            for p in params
            for name in ("gost_network_case", "gost_benchmark_case")
            if name in p
        }
        results.selection.estimate = _run_estimate(
            self.resolved, self.plan, results, self.options.dtype
        )

    def reported(self, item: pytest.Item, report: pytest.TestReport) -> None:
        if not item.get_closest_marker("gost_suite"):
            return
        self.results.outcomes.add(item.nodeid, report.when, report.outcome)
        if report.failed and item.nodeid not in self.results.timed.fell:
            self.results.outcomes.failures.append((item.name, _first_line(report)))
        elif report.skipped:
            self.results.outcomes.skips.append(_skip_reason(report))

    def checkpoint(self, session: pytest.Session | None = None, stopped: str | None = None) -> None:
        """The report so far, after every performance test (``reporting.write_checkpoint``);
        one that could not be written stops ``session`` before its next item."""
        reporting.write_checkpoint(self.config, self.options, self.resolved, self.results, stopped)
        if session is not None and self.results.reported.failure is not None:
            session.shouldstop = self.results.reported.failure

    def finish(self, session: pytest.Session, exitstatus: int) -> None:
        """The system's exit status and the report, once the items ran (``reporting.finish``)."""
        reporting.finish(session, exitstatus, self.options, self.resolved, self.results)

    def terminal_summary(self, reporter: Any) -> None:
        rendering.terminal_summary(
            reporter, self.options, self.resolved, self.results, self.plan, self.rerun
        )

    def last_lines(self, reporter: Any) -> None:
        rendering.last_lines(reporter, self.options, self.results)


def _run_estimate(resolved: Resolved, run_plan: Plan, results: Results, dtype: str) -> RunEstimate:
    """The estimate of the selected benchmark tests still to time, in the order they
    will run (a test kept from --gost-resume is not timed again), and of their checks."""
    partial = results.earlier.partial
    tests, work = [], {}
    for latin, mode in results.selection.benchmarks.values():
        if (latin, mode) in results.earlier.timings:
            continue
        rounds = run_plan.rounds + run_plan.warmup_rounds
        if partial is not None and partial.key == (latin, mode):
            rounds -= partial.done  # goes on from its last boundary
        network = resolved.networks[latin]
        label = f"{network.letter} ({latin}) {mode}"
        per_round = macs_per_image(network, mode) * run_plan.batch
        tests.append(((latin, mode), label, per_round * rounds))
        segment = training_data(dtype)[0] if mode == "training" else None
        checks = check_iterations(mode, run_plan.rounds, segment, run_plan.batch)
        work[(latin, mode)] = per_round * checks
    return RunEstimate(tests, check_work=work)


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
