"""The pytest hooks (entry point ``pytest11: gostcnn``); each delegates to the session.

``pytest --gost-backend=NAME`` with no test paths runs the suite in ``suite/conformance.py``.
The options are declared in ``run/option_definitions.py``, the session object in
``session.py``, what each item does in ``items.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_gostcnn.run.option_definitions import OPTIONS

from . import items, rendering, startup
from .session import GostSession

# The suite's file name does not match pytest's test-file patterns: the plugin collects it
# (pytest_collect_file) wherever it lies, whatever a project configured as python_files.
SUITE = Path(__file__).parent / "suite" / "conformance.py"
_SESSION = pytest.StashKey[GostSession]()
_NEW_STORAGE = pytest.StashKey[Path | None]()
PLUGIN_NAME = "gostcnn-session"


def session_of(config: pytest.Config) -> GostSession:
    return config.stash[_SESSION]


def _started(config: pytest.Config) -> GostSession | None:
    session = config.stash.get(_SESSION, None)
    return session if session is not None and session.started else None


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gostcnn", "GOST R 57700.36-2021 conformance (pytest-gostcnn)")
    for option in OPTIONS:
        if option.switch:
            group.addoption(
                option.flag, dest=option.dest, action="store_const", const="true", help=option.help
            )
        elif option.repeat:
            group.addoption(
                option.flag,
                dest=option.dest,
                action="append",
                metavar=option.metavar,
                help=option.help,
            )
        else:
            group.addoption(option.flag, dest=option.dest, metavar=option.metavar, help=option.help)
        # The same setting in the ini file ([tool.pytest.ini_options] gost_backend = "cupy");
        # the command line wins.
        parser.addini(option.dest, f"default of {option.flag}: {option.help}", default=None)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    config.stash[_NEW_STORAGE] = startup.new_benchmark_storage(config)  # before it is made


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "gost_benchmark: a timed section 9 test of the GOST R 57700.36-2021 suite"
    )
    config.addinivalue_line("markers", "gost_suite: an item of the GOST R 57700.36-2021 suite")
    session = GostSession(config)
    config.stash[_SESSION] = session
    config.pluginmanager.register(session, PLUGIN_NAME)
    # The plugin stays silent in pytest runs that ask nothing of it: without a --gost-*
    # option it starts no session until the suite itself is collected.
    if not session.given:
        return
    if not session.start().cells.is_root:
        # One summary for the whole system: cell 0 prints it, with the other cells'
        # failures; the other cells stay quiet.
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            config.pluginmanager.unregister(reporter)
    explicit = "backend" in session.options.given  # on the command line or in the ini file
    if explicit and config.args_source != pytest.Config.ArgsSource.ARGS:
        config.args[:] = [str(SUITE.parent)]
        # The suite stands in for the paths, as if given: pytest's header names no testpaths.
        config.args_source = pytest.Config.ArgsSource.ARGS


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Module | None:
    if file_path == SUITE:
        return pytest.Module.from_parent(parent, path=file_path)
    return None


@pytest.hookimpl(wrapper=True)
def pytest_report_header(config: pytest.Config):
    lines = yield
    session = _started(config)
    return rendering.header(lines, session.report_header()) if session else lines


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    items.parametrize(session_of(metafunc.config), metafunc)


@pytest.fixture(scope="session")
def gost_session(request: pytest.FixtureRequest) -> GostSession:
    resolved = session_of(request.config).resolved
    if resolved.backend is None:
        pytest.skip(f"backend {resolved.backend_label}: {resolved.unavailable}")
    return session_of(request.config)


def pytest_itemcollected(item: pytest.Item) -> None:
    session = _started(item.config)
    if session:
        session.collected(item)


def pytest_collection_finish(session: pytest.Session) -> None:
    gost = _started(session.config)
    if gost:
        gost.selected(session.items)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    session = _started(item.config)
    if session:
        session.reported(item, report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item):
    # After every performance test, the report so far (--gost-report), so that a run
    # stopped later keeps its finished tests: after the item's own teardown, and even
    # when that raised, since under MPI every cell must make the checkpoint's gather.
    try:
        return (yield)
    finally:
        session = _started(item.config)
        if session and item.nodeid in session.results.selection.benchmarks:
            session.checkpoint(item.session)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    gost = _started(session.config)
    if gost:
        gost.finish(session, exitstatus)


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    session = _started(config)
    if session:
        session.terminal_summary(terminalreporter)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    # After pytest's own last line: the run ends with the suite's verdict, as HPL's does;
    # --collect-only ran nothing, so its last line is pytest's count.
    session = _started(config)
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if session and reporter is not None and not config.option.collectonly:
        session.last_lines(reporter)
    if session:
        startup.remove_if_empty(config.stash.get(_NEW_STORAGE, None))
