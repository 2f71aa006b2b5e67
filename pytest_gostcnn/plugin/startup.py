"""A session's start: pytest's arguments checked, the ``--gost-*`` options parsed and
resolved on this machine, the cells agreed on the verdict, a stopped run resumed."""

from __future__ import annotations

import difflib
import os
import shlex
import warnings
from pathlib import Path

import pytest

from pytest_gostcnn.backend import BackendError
from pytest_gostcnn.model.network import TableError
from pytest_gostcnn.performance.cells import CellsError, detect
from pytest_gostcnn.performance.partial import PartialTest
from pytest_gostcnn.performance.timing import Timing
from pytest_gostcnn.run.benchmark_options import (
    histogram_error,
    missing_histogram_packages,
    refused_option,
)
from pytest_gostcnn.run.option_definitions import OPTIONS
from pytest_gostcnn.run.options import Options
from pytest_gostcnn.run.resolution import Resolved, resolve
from pytest_gostcnn.run.resume import Baseline, baseline, resume

from . import meeting

# resume.resume's answer: the finished tests, where from, the test stopped at a boundary.
Resumed = tuple[dict[tuple[str, str], Timing], dict, PartialTest | None]


def start(config: pytest.Config) -> tuple[Options, Resolved, Resumed | None, Baseline | None]:
    """The options, what they resolve to on this machine, with ``--gost-resume`` the
    stopped run's finished tests and with ``--gost-compare`` the baseline's tests;
    pytest.UsageError saying what is wrong.

    With several cells every rank must reach the same verdict on the options, or the
    ranks would part ways and wait for each other forever: a problem on any cell is a
    usage error on every cell, and a device missing on any cell skips the suite on all.
    """
    try:
        cells = detect()
    except CellsError as exc:
        raise pytest.UsageError(str(exc)) from None
    options, resolved, resumed, compared, error = None, None, None, None, None
    try:
        _check_one_process(config)
        _check_benchmark_options(config)
        _check_settings(config)
        options = Options.parse(*option_texts(config))
        # A backend's module is found as pytest finds test code (docs/backends.md).
        search = [("invocation directory", config.invocation_params.dir)]
        search += [("rootdir", config.rootpath)]
        resolved = resolve(options, cells, search)
        if cells.size > 1:
            _check_same_items(config)
        if options.resume is not None:
            resumed = resume(options, resolved)
        compared = baseline(options, resolved)
    except BackendError as exc:  # --gost-versus's name their option
        error = str(exc) if str(exc).startswith("--gost-versus=") else f"--gost-backend: {exc}"
    except (TableError, ValueError, pytest.UsageError) as exc:  # ReportError: a ValueError
        error = str(exc)
    errors = meeting.errors_on_cells(cells, error)
    if errors:
        cell, why = errors[0]
        if not cells.is_root:  # one message for the job: cell 0 prints it, the others exit 4
            raise pytest.UsageError()
        raise pytest.UsageError(why if cells.size == 1 else f"cell {cell}: {why}")
    missing = meeting.errors_on_cells(cells, resolved.unavailable)
    if missing and resolved.unavailable is None:
        resolved = resolved.without_backend(f"cell {missing[0][0]}: {missing[0][1]}")
    return options, resolved, resumed, compared


def option_texts(
    config: pytest.Config,
) -> tuple[dict[str, str | list[str] | None], dict[str, str]]:
    """Each option's text, from the command line or else the ini file (None: neither; a
    list for a repeatable option given on the command line), and for a text from the ini
    file the setting's name, for an error to name."""
    texts, flags = {}, {}
    for option in OPTIONS:
        text = config.getoption(option.dest)
        if text is None:
            setting = config.getini(option.dest)  # None or "" (pytest 8) when not set
            if setting not in (None, ""):
                text, flags[option.name] = str(setting), option.dest
        texts[option.name] = text
    return texts, flags


def _settings_read(config: pytest.Config) -> dict:
    """Every setting pytest read, from the ini file or ``-o``, by name."""
    # Listed only in Config._inicfg (pytest 9; before, the public Config.inicfg).
    read = getattr(config, "_inicfg", None)
    if read is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            read = getattr(config, "inicfg", {})
    return dict(read)


def unknown_settings(config: pytest.Config) -> dict[str, str]:
    """The ``gost_*`` settings read that no plugin declares (getini refuses them), each
    with where it was given."""
    unknown = {}
    for name, value in sorted(_settings_read(config).items()):
        if not name.startswith("gost_"):
            continue
        try:
            config.getini(name)
        except ValueError:
            origin = getattr(value, "origin", None)
            inifile = config.inipath.name if config.inipath else "the ini file"
            unknown[name] = "given with -o" if origin == "override" else f"in {inifile}"
    return unknown


def _check_settings(config: pytest.Config) -> None:
    """A misspelt setting would leave its option at the default, behind a generic warning."""
    unknown = unknown_settings(config)
    if unknown:
        name, where = next(iter(unknown.items()))
        known = [option.dest for option in OPTIONS]
        close = difflib.get_close_matches(name, known, n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        raise ValueError(
            f"{name} ({where}): not a setting of pytest-gostcnn; {hint}"
            f"its settings are {', '.join(known)} (docs/options.md)"
        )


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
    """pytest-benchmark's options that the suite's own loop of rounds cannot honour, and
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


def new_benchmark_storage(config: pytest.Config) -> Path | None:
    """pytest-benchmark's storage folder (``--benchmark-storage``, ``.benchmarks``) where it
    does not exist yet: pytest-benchmark makes it as it starts, whether or not a run saves."""
    storage = config.getoption("benchmark_storage", None) or ""
    if "://" in storage and not storage.startswith("file://"):
        return None  # elasticsearch: no folder
    folder = Path(storage.removeprefix("file://")).absolute()
    return None if folder.exists() else folder


def remove_if_empty(folder: Path | None) -> None:
    """The storage folder this run made, where nothing was saved in it: a run of the suite
    leaves no empty ``.benchmarks`` behind."""
    if folder is not None:
        try:
            folder.rmdir()  # only an empty folder
        except OSError:
            pass
