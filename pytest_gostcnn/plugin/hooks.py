"""The pytest plugin (entry point ``pytest11: gostcnn``): options, conformance items, summary.

``pytest --gost-backend=NAME`` with no test paths runs the suite in
``pytest_gostcnn/suite/conformance.py``; every ``--gost-*`` option is checked here and a
bad one ends the run with one usage error (options: ``session.py``). What each item does is
in ``runner.py``; the verification and the timing themselves in ``verification.py`` and
``benchmark.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_gostcnn.backend import BackendError
from pytest_gostcnn.conformance.layer_cases import layer_cases
from pytest_gostcnn.conformance.verification import layer_steps
from pytest_gostcnn.machine.facts import cpu_model
from pytest_gostcnn.model.dtypes import INFERENCE_DTYPES, TRAINING_DTYPES
from pytest_gostcnn.model.network import TableError
from pytest_gostcnn.performance.cells import CellsError, detect
from pytest_gostcnn.performance.timing import QUICK_IMAGES

from . import summary
from .items import network_id
from .report import build_report, write_report
from .session import MAX_BATCH, OPTIONS, GostSession, build_session

# The suite's file name does not match pytest's test-file patterns: the plugin collects it
# (pytest_collect_file) wherever it lies, whatever a project configured as python_files.
SUITE = Path(__file__).parent / "suite" / "conformance.py"
_SESSION = pytest.StashKey[GostSession]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gostcnn", "GOST R 57700.36-2021 conformance (pytest-gostcnn)")
    group.addoption(
        "--gost-backend",
        metavar="NAME",
        help="backend to verify: a registered name (numpy, ...) or package.module:Class "
        "(default numpy). Given without test paths, runs the suite shipped with the plugin.",
    )
    group.addoption(
        "--gost-dtype",
        metavar="TYPE",
        help=f"data type: one of {', '.join(INFERENCE_DTYPES)} that the backend declares; "
        f"training only {', '.join(TRAINING_DTYPES)} (default float32)",
    )
    group.addoption(
        "--gost-batch", metavar="B", help=f"batch size B, 1..{MAX_BATCH} (section 9.8; default 2)"
    )
    group.addoption(
        "--gost-mode", metavar="MODE", help="training, inference or both (default both)"
    )
    group.addoption(
        "--gost-networks",
        metavar="LIST",
        help="comma-separated networks by letter (M G V S R Sh, or М Г В С Р Ш) or name "
        "(default all)",
    )
    group.addoption("--gost-seed", metavar="N", help="seed of every random draw (default 0)")
    group.addoption(
        "--gost-tables",
        metavar="DIR",
        help="directory of network tables (YAML) to use instead of the shipped reconstructions",
    )
    group.addoption(
        "--gost-rmse-threshold",
        metavar="SHARE",
        help="override СКОП: the admissible RMSE of every array as a share of the reference "
        "array's RMS (0 admits only reference-grade results)",
    )
    group.addoption(
        "--gost-profile",
        metavar="PROFILE",
        help=f"benchmark profile: quick (at least {QUICK_IMAGES} images and 3 rounds of B per "
        "test, not compliant; "
        "default) or full (1,000,000 images per cell, as section 9.3 requires)",
    )
    group.addoption(
        "--gost-peak",
        metavar="MAC/s",
        help="theoretical peak of one computing cell in the chosen data type, e.g. 2.5e12 or "
        "2.5T (default: estimated from the device, and labelled so)",
    )
    group.addoption(
        "--gost-report",
        metavar="PATH",
        help="write a JSON report (system, options, verdicts, timings, ОРП, evaluation)",
    )
    group.addoption(
        "--gost-local-cell",
        metavar="K",
        help="run one process as the K-th computing cell of a node, on the device that cell "
        "uses (e.g. GPU K); a failure on cell K of an MPI run gives it in its rerun command "
        "(default: the MPI local rank, 0 without MPI)",
    )


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "gost_benchmark: a timed section 9 test of the GOST R 57700.36-2021 suite"
    )
    config.addinivalue_line("markers", "gost_suite: an item of the GOST R 57700.36-2021 suite")
    # The plugin stays silent in pytest runs that ask nothing of it: without a --gost-*
    # option it builds no session until the suite itself is collected.
    if not any(config.getoption(f"gost_{name}") is not None for name in OPTIONS):
        return
    session = session_of(config)
    if not session.cells.is_root:
        # One summary for the whole system: cell 0 prints it, with the other cells'
        # failures; the other cells stay quiet.
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            config.pluginmanager.unregister(reporter)
    explicit = config.getoption("gost_backend") is not None
    if explicit and config.args_source != pytest.Config.ArgsSource.ARGS:
        config.args[:] = [str(SUITE.parent)]


def session_of(config: pytest.Config) -> GostSession:
    """The session the options describe, built (and checked) on first use.

    With several cells every rank must reach the same verdict on the options, or the
    ranks would part ways and wait for each other forever: a problem on any cell is a
    usage error on every cell, and a device missing on any cell skips the suite on all.
    """
    if _SESSION in config.stash:
        return config.stash[_SESSION]
    try:
        cells = detect()
    except CellsError as exc:
        raise pytest.UsageError(str(exc)) from None
    session, error = None, None
    try:
        session = build_session(config, cells)
        if cells.size > 1:
            _check_same_items(config)
    except BackendError as exc:
        error = f"--gost-backend: {exc}"
    except (TableError, ValueError) as exc:
        error = str(exc)
    errors = [(cell, why) for cell, why in enumerate(cells.allgather(error)) if why]
    if errors:
        cell, why = errors[0]
        raise pytest.UsageError(why if cells.size == 1 else f"cell {cell}: {why}")
    missing = [(c, why) for c, why in enumerate(cells.allgather(session.unavailable)) if why]
    if missing and session.unavailable is None:
        session.backend, session.unavailable = None, f"cell {missing[0][0]}: {missing[0][1]}"
        session.device, session.system = None, {}
    config.stash[_SESSION] = session
    return session


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


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Module | None:
    if file_path == SUITE:
        return pytest.Module.from_parent(parent, path=file_path)
    return None


def pytest_report_header(config: pytest.Config) -> list[str]:
    session = config.stash.get(_SESSION, None)
    if session is None:
        return []
    if session.backend is None:
        backend = f"{session.backend_name} (unavailable: {session.unavailable})"
    else:
        cls = type(session.backend)
        backend = f"{session.backend_name} {cls.version} on {session.device}"
    networks = ", ".join(
        f"{n.letter} ({n.latin}, {n.provenance})" for n in session.networks.values()
    )
    return [
        f"gostcnn: backend {backend}; dtype {session.dtype}; batch {session.batch}; "
        f"mode {'+'.join(session.modes)}; seed {session.seed}",
        f"gostcnn: networks {networks}",
    ]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    wanted = {"gost_layer_case", "gost_network_case", "gost_benchmark_case"} & set(
        metafunc.fixturenames
    )
    if not wanted:
        return
    session = session_of(metafunc.config)
    if "gost_layer_case" in wanted:
        steps_for = (
            (lambda case: ("forward",))
            if session.modes == ("inference",)
            else (lambda case: layer_steps(case.layer))
        )
        params = [(case, step) for case in layer_cases() for step in steps_for(case)]
        ids = [f"{c.layer.type.name}-{step}-{c.tag}-{session.dtype}" for c, step in params]
        metafunc.parametrize("gost_layer_case", params, ids=ids)
    for name in ("gost_network_case", "gost_benchmark_case"):
        if name in wanted:
            params = [(latin, mode) for latin in session.networks for mode in session.modes]
            ids = [network_id(session, latin, mode) for latin, mode in params]
            metafunc.parametrize(name, params, ids=ids)


@pytest.fixture(scope="session")
def gost_session(request: pytest.FixtureRequest) -> GostSession:
    session = session_of(request.config)
    if session.backend is None:
        pytest.skip(f"backend {session.backend_name}: {session.unavailable}")
    return session


def pytest_itemcollected(item: pytest.Item) -> None:
    session = item.config.stash.get(_SESSION, None)
    if session is not None and item.get_closest_marker("gost_suite"):
        session.suite_items += 1


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    session = config.stash.get(_SESSION, None)
    if session is None:
        return
    for line in summary.nothing_verified(session, config.getoption("gost_backend") is not None):
        terminalreporter.write_line(f"gostcnn: {line}", yellow=True, bold=True)
    if not (session.results or session.layer_results):
        return
    terminalreporter.write_sep("=", "GOST R 57700.36-2021, section 8: verification")
    for line in summary.verification_lines(session):
        terminalreporter.write_line(line)
    if session.benchmarked:
        terminalreporter.write_sep("=", "GOST R 57700.36-2021, section 9: performance")
        for line in summary.performance_lines(session):
            terminalreporter.write_line(line)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    session = item.config.stash.get(_SESSION, None)
    if session is not None and report.failed and item.get_closest_marker("gost_suite"):
        session.failures.append((item.name, _first_line(report)))
    return report


def _first_line(report: pytest.TestReport) -> str:
    """The failure in one line for cell 0's summary: its first failure, and its rerun
    command (which names the failing cell's device, ``--gost-local-cell``)."""
    lines = str(report.longrepr).splitlines()
    failure = next((line for line in lines if "first failure:" in line), None)
    rerun = next((line for line in lines if line.startswith("rerun: ")), None)
    text = (failure or str(report.longrepr).strip().splitlines()[-1]).strip()
    return f"{text}; {rerun}" if failure and rerun else text


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    gost = session.config.stash.get(_SESSION, None)
    if gost is None:
        return
    gost.exitstatus = int(exitstatus)
    gathered = gost.cells.gather(
        {
            "cell": gost.cells.rank,
            "host": gost.cells.host,
            "cpu_model": cpu_model(),
            "device": gost.device,
            "system": gost.system,
            "peak": gost.peak.macs_per_second if gost.peak else None,
            "failures": gost.failures,
        }
    )
    if not gost.cells.is_root:
        return
    gost.cell_reports = gathered
    if gost.report is not None:
        try:
            write_report(gost.report, build_report(gost))
        except (OSError, ValueError, TypeError) as exc:  # Value/TypeError: not JSON
            reporter = session.config.pluginmanager.get_plugin("terminalreporter")
            message = f"gostcnn: could not write --gost-report={gost.report}: {exc}"
            if reporter is not None:
                reporter.write_line(message, red=True)
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
