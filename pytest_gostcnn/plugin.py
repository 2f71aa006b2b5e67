"""The pytest plugin (entry point ``pytest11: gostcnn``): options, conformance items, summary.

``pytest --gost-backend=NAME`` with no test paths runs the suite in
``pytest_gostcnn/suite/conformance.py``; every ``--gost-*`` option is checked here and a
bad one ends the run with one usage error. The verification itself lives in ``verification.py``.
"""

from __future__ import annotations

import math
import shlex
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from . import summary
from .backend import (
    INFERENCE_DTYPES,
    TRAINING_DTYPES,
    Backend,
    BackendError,
    load_backend_class,
)
from .benchmark import PROFILES, QUICK_IMAGES, CellTiming, Rounds, Timing, macs_per_image, plan
from .cells import Cells, CellsError, detect
from .evaluation import designate_test
from .layer_cases import LayerCase, layer_cases
from .network import CYRILLIC, LATIN, Network, TableError, load_networks, network_key
from .peak import Peak, parse_peak
from .report import build_report, write_report
from .system import cpu_model
from .verification import NOT_CORRECT, Verification, layer_steps, verify_layer, verify_network

# The suite's file name does not match pytest's test-file patterns: the plugin collects it
# (pytest_collect_file) wherever it lies, whatever a project configured as python_files.
SUITE = Path(__file__).parent / "suite" / "conformance.py"
MODES = ("training", "inference", "both")
MAX_BATCH = 1024  # SPEC §7: B is an integer from 1 to 1024
DEFAULTS = {
    "backend": "numpy",
    "dtype": "float32",
    "batch": "2",
    "mode": "both",
    "seed": "0",
    "profile": "quick",
}
OPTIONS = (
    "backend",
    "dtype",
    "batch",
    "mode",
    "networks",
    "seed",
    "tables",
    "rmse_threshold",
    "profile",
    "peak",
    "report",
)


@dataclass
class GostSession:
    """What the options chose, and every verification this session ran."""

    backend_name: str
    backend: Backend | None
    unavailable: str | None
    dtype: str
    batch: int
    modes: tuple[str, ...]
    networks: dict[str, Network]
    seed: int
    tables: str | None
    threshold: float | None
    networks_option: str | None
    profile: str = "quick"
    peak: Peak | None = None
    report: str | None = None
    results: dict[tuple[str, str], Verification] = field(default_factory=dict)
    layer_results: list[Verification] = field(default_factory=list)
    timings: dict[tuple[str, str], Timing] = field(default_factory=dict)
    benchmarked: list[tuple[str, str]] = field(default_factory=list)
    cells: Cells = field(default_factory=Cells)
    failures: list[tuple[str, str]] = field(default_factory=list)  # this cell's (item, reason)
    cell_reports: list[dict] = field(default_factory=list)  # every cell's, on cell 0
    exitstatus: int | None = None
    progress: Callable[[str], None] | None = None

    @property
    def system_peak(self) -> float | None:
        """The system's peak: the sum of its cells' peaks (known on cell 0 at the end)."""
        peaks = [report["peak"] for report in self.cell_reports]
        return sum(peaks) if peaks and None not in peaks else None

    def options(self, networks: str | None = None, mode: str | None = None) -> list[str]:
        """The ``--gost-*`` options that reproduce this session (optionally narrowed)."""
        args = [
            f"--gost-backend={self.backend_name}",
            f"--gost-dtype={self.dtype}",
            f"--gost-batch={self.batch}",
            f"--gost-seed={self.seed}",
        ]
        if self.tables:
            args.append(f"--gost-tables={self.tables}")
        if self.threshold is not None:
            args.append(f"--gost-rmse-threshold={self.threshold}")
        if self.profile != DEFAULTS["profile"]:
            args.append(f"--gost-profile={self.profile}")
        networks = networks or self.networks_option
        if networks:
            args.append(f"--gost-networks={networks}")
        mode = mode or (self.modes[0] if len(self.modes) == 1 else None)
        if mode:
            args.append(f"--gost-mode={mode}")
        return args

    def rerun(self, keyword: str, networks: str | None = None, mode: str | None = None) -> str:
        return shlex.join(["pytest", *self.options(networks, mode), "-k", keyword])


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
        help=f"benchmark profile: quick ({QUICK_IMAGES} images per test, not compliant; "
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
        session = _session(config, cells)
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


def _option(config: pytest.Config, name: str) -> str | None:
    value = config.getoption(f"gost_{name}")
    return DEFAULTS.get(name) if value is None else value


def _session(config: pytest.Config, cells: Cells) -> GostSession:
    mode = _option(config, "mode")
    if mode not in MODES:
        raise ValueError(f"--gost-mode={mode}: choose one of {', '.join(MODES)}")
    modes = ("training", "inference") if mode == "both" else (mode,)
    batch = _integer("--gost-batch", _option(config, "batch"), 1, MAX_BATCH)
    seed = _integer("--gost-seed", _option(config, "seed"), 0, 2**63 - 1)
    threshold = _threshold(config.getoption("gost_rmse_threshold"))
    tables = config.getoption("gost_tables")
    try:
        all_networks = load_networks(tables)
    except TableError as exc:
        raise TableError(f"--gost-tables: {exc}") from None
    networks_option = config.getoption("gost_networks")
    networks = _select(all_networks, networks_option)

    name = _option(config, "backend")
    cls = load_backend_class(name)
    dtype = _option(config, "dtype")
    _check_dtype(cls, name, dtype, modes)
    try:
        unavailable = cls.unavailable_reason()
    except Exception as exc:  # a device probe that fails means no usable device
        unavailable = f"its availability check raised {type(exc).__name__}: {exc}"
    backend = None
    if unavailable is None:
        try:
            backend = cls(dtype, cell=cells.local_rank)
        except Exception as exc:
            raise BackendError(
                f"backend {name!r} failed to start: {type(exc).__name__}: {exc}"
            ) from exc
    profile = _option(config, "profile")
    if profile not in PROFILES:
        raise ValueError(f"--gost-profile={profile}: choose one of {', '.join(PROFILES)}")
    peak_option = config.getoption("gost_peak")
    peak = parse_peak(peak_option) if peak_option is not None else None
    if peak is None and backend is not None:
        peak = backend.peak()
    report = config.getoption("gost_report")
    if report is not None:
        _check_report_path(report)
    return GostSession(
        cells=cells,
        profile=profile,
        peak=peak,
        report=report,
        progress=_progress_writer(config),
        backend_name=name,
        backend=backend,
        unavailable=unavailable,
        dtype=dtype,
        batch=batch,
        modes=modes,
        networks=networks,
        seed=seed,
        tables=tables,
        threshold=threshold,
        networks_option=networks_option,
    )


def _check_report_path(path: str) -> None:
    folder = Path(path).expanduser().resolve().parent
    if not folder.is_dir():
        raise ValueError(f"--gost-report={path}: the folder {folder} does not exist")
    if Path(path).is_dir():
        raise ValueError(f"--gost-report={path}: is a directory; give a file name")


def _progress_writer(config: pytest.Config) -> Callable[[str], None]:
    """Progress lines for long benchmarks, shown even while pytest captures output."""

    def write(line: str) -> None:
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        capture = config.pluginmanager.get_plugin("capturemanager")
        if reporter is None:
            return
        if capture is None:
            reporter.write_line(f"gostcnn: {line}")
            return
        with capture.global_and_fixture_disabled():
            reporter.write_line(f"gostcnn: {line}")

    return write


def _integer(option: str, text: str, low: int, high: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{option}={text}: not an integer") from None
    if not low <= value <= high:
        raise ValueError(f"{option}={value}: must be an integer from {low} to {high}")
    return value


def _threshold(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"--gost-rmse-threshold={text}: not a number") from None
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"--gost-rmse-threshold={text}: must be a finite number >= 0")
    return value


def _check_dtype(cls: type[Backend], name: str, dtype: str, modes: tuple[str, ...]) -> None:
    if dtype not in INFERENCE_DTYPES:
        raise ValueError(
            f"--gost-dtype={dtype}: not a data type of the standard "
            f"(section 11: {', '.join(INFERENCE_DTYPES)})"
        )
    for mode, declared, allowed in (
        ("inference", cls.inference_dtypes, INFERENCE_DTYPES),
        ("training", cls.training_dtypes, TRAINING_DTYPES),
    ):
        if mode not in modes:
            continue
        if dtype not in allowed:
            raise ValueError(
                f"--gost-dtype={dtype}: the standard allows only {', '.join(allowed)} for "
                f"{mode}; add --gost-mode=inference"
            )
        if dtype not in declared:
            raise ValueError(
                f"--gost-dtype={dtype}: backend {name!r} does not declare it for {mode} "
                f"(it declares {', '.join(declared) or 'none'})"
            )


def _select(networks: dict[str, Network], spec: str | None) -> dict[str, Network]:
    if not spec:
        return networks
    chosen: dict[str, Network] = {}
    for token in (t.strip() for t in spec.split(",")):
        if not token:
            continue
        try:
            latin = network_key(token)
        except KeyError:
            by_name = [n for n in networks.values() if n.name.lower().startswith(token.lower())]
            if len(by_name) != 1:
                known = ", ".join(f"{n.latin} ({n.letter}, {n.name})" for n in networks.values())
                raise ValueError(
                    f"--gost-networks: unknown network {token!r}; known: {known}"
                ) from None
            latin = by_name[0].latin
        if latin not in networks:
            raise ValueError(
                f"--gost-networks: network {latin} ({CYRILLIC[latin]}) has no table in "
                "--gost-tables"
            )
        chosen[latin] = networks[latin]
    if not chosen:
        raise ValueError("--gost-networks: no network named")
    return {latin: chosen[latin] for latin in LATIN.values() if latin in chosen}


def pytest_report_header(config: pytest.Config) -> list[str]:
    session = config.stash.get(_SESSION, None)
    if session is None:
        return []
    if session.backend is None:
        backend = f"{session.backend_name} (unavailable: {session.unavailable})"
    else:
        cls = type(session.backend)
        backend = f"{session.backend_name} {cls.version} on {session.backend.device()}"
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
            ids = [_network_id(session, latin, mode) for latin, mode in params]
            metafunc.parametrize(name, params, ids=ids)


def _network_id(session: GostSession, latin: str, mode: str) -> str:
    return f"{latin}-{mode}-B{session.batch}"


@pytest.fixture(scope="session")
def gost_session(request: pytest.FixtureRequest) -> GostSession:
    session = session_of(request.config)
    if session.backend is None:
        pytest.skip(f"backend {session.backend_name}: {session.unavailable}")
    return session


def case_seed(seed: int, test_id: str) -> int:
    """The seed of one test's data: the session seed and the test's id, nothing else."""
    return int(np.random.SeedSequence([seed, zlib.crc32(test_id.encode())]).generate_state(1)[0])


def run_layer_case(session: GostSession, case: tuple[LayerCase, str], node: pytest.Item) -> None:
    layer_case, step = case
    test_id = node.callspec.id
    result = verify_layer(
        session.backend,
        layer_case.layer,
        step,
        session.batch,
        case_seed(session.seed, test_id),
        subject=test_id,
        threshold=session.threshold,
        draw_input=layer_case.draw_input,
    )
    session.layer_results.append(result)
    if result.verdict == NOT_CORRECT:
        _fail(session, result, session.rerun(f"test_layer and {test_id}"))


def run_network_case(session: GostSession, case: tuple[str, str], node: pytest.Item) -> None:
    latin, mode = case
    result = _verified(session, latin, mode)
    if result.verdict == NOT_CORRECT:
        _fail(session, result, session.rerun("test_network", networks=latin, mode=mode))


def _verified(session: GostSession, latin: str, mode: str) -> Verification:
    """This session's verification of a network in a mode, run now if it has not been."""
    if (latin, mode) not in session.results:
        session.results[(latin, mode)] = verify_network(
            session.backend,
            session.networks[latin],
            mode,
            session.batch,
            case_seed(session.seed, _network_id(session, latin, mode)),
            session.threshold,
        )
    return session.results[(latin, mode)]


def run_benchmark_case(session: GostSession, case: tuple[str, str], benchmark) -> None:
    """Section 9: time one network in one mode, after it verified correct (section 8)."""
    latin, mode = case
    session.benchmarked.append(case)
    cells = session.cells
    verification = _verified(session, latin, mode)
    own = None if verification.verdict != NOT_CORRECT else verification.first_failure
    failed = [(cell, why) for cell, why in enumerate(cells.allgather(own)) if why is not None]
    if failed:
        reasons = "; ".join(f"cell {cell}: {why}" for cell, why in failed)
        pytest.skip(
            f"{verification.subject} is not verified correct in this session ({reasons}); "
            "section 9 times verified implementations only"
        )
    network = session.networks[latin]
    run_plan = plan(session.profile, session.batch)
    rounds, error = None, None
    try:
        rounds = Rounds(
            session.backend,
            network,
            mode,
            run_plan,
            session.seed,
            cells.rank,
            session.progress,
            before_round=cells.barrier if cells.size > 1 else None,
        )
    except Exception as exc:  # the backend's failure fails the item on every cell
        error = f"the backend raised {type(exc).__name__}: {exc} while loading the weights"
    _fail_if_any_cell(cells, error, "preparing")
    benchmark.pedantic(
        rounds.target,
        setup=rounds.setup,
        rounds=run_plan.rounds,
        warmup_rounds=run_plan.warmup_rounds,
    )
    _fail_if_any_cell(cells, rounds.error, "timing")
    if benchmark.stats is None:
        pytest.skip("pytest-benchmark is disabled (--benchmark-disable): nothing was timed")
    stats = benchmark.stats.stats
    own_timing = CellTiming(
        cell=cells.rank,
        device=f"{cells.host}: {session.backend.device()}",
        images=run_plan.images,
        round_seconds=tuple(stats.data),
        peak=session.peak,
        first_image=rounds.first_image,
    )
    timing = Timing(
        latin=latin,
        mode=mode,
        dtype=session.dtype,
        batch=session.batch,
        rounds=run_plan.rounds,
        macs_per_image=macs_per_image(network, mode),
        compliant=run_plan.compliant,
        cells=tuple(cells.allgather(own_timing)),
    )
    session.timings[(latin, mode)] = timing
    benchmark.extra_info.update(
        {
            "images": timing.images,
            "MAC/s": timing.macs_per_second,
            "ОРП %": timing.orp,
            "compliant": timing.compliant,
            "designation": designate_test(
                latin, mode, timing.dtype, timing.batch, timing.compliant
            ),
        }
    )


def _fail_if_any_cell(cells: Cells, error: str | None, stage: str) -> None:
    """Fail the item on every cell when one cell's backend failed (all stay in step)."""
    failed = [(cell, why) for cell, why in enumerate(cells.allgather(error)) if why]
    if failed:
        pytest.fail(
            "; ".join(f"cell {cell} failed while {stage}: {why}" for cell, why in failed),
            pytrace=False,
        )


def _fail(session: GostSession, result: Verification, command: str) -> None:
    lines = [f"{result.subject}: {result.verdict}", f"first failure: {result.first_failure}"]
    failing = [c for c in result.checks if not c.passed]
    if len(failing) > 1:
        lines.append(f"{len(failing)} of {len(result.checks)} arrays failed; the worst:")
        lines += [f"  {c.describe()}" for c in sorted(failing, key=lambda c: -c.ratio)[:5]]
    lines += [f"seed: --gost-seed={session.seed}", f"rerun: {command}"]
    pytest.fail("\n".join(lines), pytrace=False)


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    session = config.stash.get(_SESSION, None)
    if session is None or not (session.results or session.layer_results):
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
    text = str(report.longrepr)
    failure = next((line for line in text.splitlines() if "first failure:" in line), None)
    return (failure or text.strip().splitlines()[-1]).strip()


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
            "device": gost.backend.device() if gost.backend else None,
            "system": gost.backend.system() if gost.backend else {},
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
        except OSError as exc:
            reporter = session.config.pluginmanager.get_plugin("terminalreporter")
            message = f"gostcnn: could not write --gost-report={gost.report}: {exc}"
            if reporter is not None:
                reporter.write_line(message, red=True)
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
