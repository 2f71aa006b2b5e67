"""A conformance session: what the ``--gost-*`` options chose, checked, and what it ran.

Every option is validated here, at the boundary where it entered, with a message naming it.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pytest_gostcnn.backend import Backend, BackendError, load_backend_class
from pytest_gostcnn.conformance.verification import Verification
from pytest_gostcnn.machine.peak import MIN_PEAK, Peak, parse_peak
from pytest_gostcnn.model.dtypes import INFERENCE_DTYPES, TRAINING_DTYPES
from pytest_gostcnn.model.network import (
    CYRILLIC,
    LATIN,
    Network,
    TableError,
    load_networks,
    network_key,
)
from pytest_gostcnn.performance.cells import Cells
from pytest_gostcnn.performance.timing import PROFILES, Timing

from .report import TEMPORARY_PREFIX

MODES = ("training", "inference", "both")
MAX_BATCH = 1024  # standard.md §7: B is an integer from 1 to 1024
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
    "local_cell",
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
    local_cell: int = 0  # the cell index the backend was given: its device
    device: str | None = None  # the backend's device(), asked once
    system: dict = field(default_factory=dict)  # the backend's system(), asked once
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
    suite_items: int = 0  # items of the suite collected in this run
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
        if self.local_cell:  # a failure on cell k of a node reruns on that cell's device
            args.append(f"--gost-local-cell={self.local_cell}")
        return args

    def rerun(self, keyword: str, networks: str | None = None, mode: str | None = None) -> str:
        return shlex.join(["pytest", *self.options(networks, mode), "-k", keyword])


def _option(config: pytest.Config, name: str) -> str | None:
    value = config.getoption(f"gost_{name}")
    return DEFAULTS.get(name) if value is None else value


def build_session(config: pytest.Config, cells: Cells) -> GostSession:
    """The session the ``--gost-*`` options describe; raises ValueError, BackendError or
    TableError naming the option that is wrong."""
    mode = _option(config, "mode")
    if mode not in MODES:
        raise ValueError(f"--gost-mode={mode}: choose one of {', '.join(MODES)}")
    modes = ("training", "inference") if mode == "both" else (mode,)
    batch = integer("--gost-batch", _option(config, "batch"), 1, MAX_BATCH)
    seed = integer("--gost-seed", _option(config, "seed"), 0, 2**63 - 1)
    threshold = _threshold(config.getoption("gost_rmse_threshold"))
    tables = config.getoption("gost_tables")
    try:
        all_networks = load_networks(tables)
    except TableError as exc:
        raise TableError(f"--gost-tables: {exc}") from None
    networks_option = config.getoption("gost_networks")
    networks = select_networks(all_networks, networks_option)

    name = _option(config, "backend")
    cls = load_backend_class(name)
    dtype = _option(config, "dtype")
    _check_dtype(cls, name, dtype, modes)
    try:
        unavailable = cls.unavailable_reason()
    except Exception as exc:  # a device probe that fails means no usable device
        unavailable = f"its availability check raised {type(exc).__name__}: {exc}"
    local_cell = _local_cell(config.getoption("gost_local_cell"), cells)
    backend = None
    if unavailable is None:
        try:
            backend = cls(dtype, cell=local_cell)
        except Exception as exc:
            raise BackendError(
                f"backend {name!r} failed to start: {type(exc).__name__}: {exc}"
            ) from exc
    profile = _option(config, "profile")
    if profile not in PROFILES:
        raise ValueError(f"--gost-profile={profile}: choose one of {', '.join(PROFILES)}")
    peak_option = config.getoption("gost_peak")
    peak = parse_peak(peak_option) if peak_option is not None else None
    device, system = None, {}
    if backend is not None:
        device, system, estimate = _describe(backend, name, ask_peak=peak is None)
        peak = peak or estimate
    report = config.getoption("gost_report")
    if report is not None:
        report = _check_report_path(report)
    return GostSession(
        cells=cells,
        local_cell=local_cell,
        device=device,
        system=system,
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


def _describe(backend: Backend, name: str, ask_peak: bool) -> tuple[str, dict, Peak | None]:
    """The backend's ``device()``, ``system()`` and (if asked) ``peak()``, each asked once
    here, so that a backend whose answer is broken fails at the start, saying which."""
    answers = {}
    for method, expected in (("device", str), ("system", dict), ("peak", (Peak, type(None)))):
        if method == "peak" and not ask_peak:
            answers[method] = None
            continue
        try:
            answer = getattr(backend, method)()
        except Exception as exc:
            raise BackendError(
                f"backend {name!r}: its {method}() raised {type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(answer, expected):
            wanted = "a Peak or None" if method == "peak" else f"a {expected.__name__}"
            raise BackendError(
                f"backend {name!r}: its {method}() returned {type(answer).__name__} "
                f"{answer!r:.60}, expected {wanted}"
            )
        answers[method] = answer
    peak = answers["peak"]
    if peak is not None and not (
        isinstance(peak.macs_per_second, int | float)
        and math.isfinite(peak.macs_per_second)
        and peak.macs_per_second >= MIN_PEAK
    ):
        raise BackendError(
            f"backend {name!r}: its peak() is {peak.macs_per_second!r} MAC/s, not a number of "
            f"at least {MIN_PEAK:g}; give --gost-peak=MAC/s"
        )
    try:  # it goes into the report as it is
        json.dumps(answers["system"], allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise BackendError(
            f"backend {name!r}: its system() is not plain JSON data (text, numbers, lists, "
            f"mappings): {exc}"
        ) from None
    return answers["device"], answers["system"], peak


def _check_report_path(path: str) -> str:
    """The report's path with ``~`` expanded, once it is clear a file can be written there
    (checked now, not after a run of hours)."""
    if not path.strip():
        raise ValueError("--gost-report=: empty; give a file name")
    try:
        given = Path(path).expanduser()
        is_dir = given.is_dir()
        target = given.resolve()  # a symbolic link: the file it points to
        folder_exists = target.parent.is_dir()
        special = target.exists() and not target.is_file()
    except (OSError, RuntimeError) as exc:  # ~nouser, a name too long, a link loop
        raise ValueError(f"--gost-report={path}: {exc}") from None
    folder = target.parent
    if path.endswith(("/", os.sep)) or is_dir:
        raise ValueError(f"--gost-report={path}: is a directory; give a file name")
    if not folder_exists:
        raise ValueError(f"--gost-report={path}: the folder {folder} does not exist")
    if special:
        raise ValueError(f"--gost-report={path}: exists and is not a regular file")
    try:  # the report is written as a temporary file in that folder, then renamed
        handle, probe = tempfile.mkstemp(prefix=TEMPORARY_PREFIX, dir=folder)
        os.close(handle)
        os.unlink(probe)
    except OSError as exc:
        raise ValueError(
            f"--gost-report={path}: cannot write in {folder}: {exc.strerror or exc}"
        ) from None
    return str(target)


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


def integer(option: str, text: str, low: int, high: int) -> int:
    """``text`` as an integer from ``low`` to ``high``; ValueError naming ``option``."""
    if not re.fullmatch(r"\s*[+-]?[0-9]+\s*", text):  # int() would take "1_0" and "٣"
        raise ValueError(f"{option}={text}: not an integer")
    value = int(text)
    if not low <= value <= high:
        raise ValueError(f"{option}={value}: must be an integer from {low} to {high}")
    return value


def _local_cell(text: str | None, cells: Cells) -> int:
    """The index among its node's cells that the backend is given (it picks the device):
    the MPI local rank, or ``--gost-local-cell`` in a single-process run."""
    if text is None:
        return cells.local_rank
    if cells.size > 1:
        raise ValueError(
            f"--gost-local-cell={text}: under an MPI launcher each rank is the cell of its "
            "local rank; give this option only to a single-process run"
        )
    return integer("--gost-local-cell", text, 0, 2**31 - 1)


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


def select_networks(
    networks: dict[str, Network],
    spec: str | None,
    option: str = "--gost-networks",
    tables_option: str = "--gost-tables",
) -> dict[str, Network]:
    """The networks ``spec`` names (letters, Latin or Cyrillic, or a name's start), in the
    standard's order; all of them when ``spec`` is None or empty."""
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
                raise ValueError(f"{option}: unknown network {token!r}; known: {known}") from None
            latin = by_name[0].latin
        if latin not in networks:
            raise ValueError(
                f"{option}: network {latin} ({CYRILLIC[latin]}) has no table in {tables_option}"
            )
        chosen[latin] = networks[latin]
    if not chosen:
        raise ValueError(f"{option}={spec}: no network named")
    return {latin: chosen[latin] for latin in LATIN.values() if latin in chosen}
