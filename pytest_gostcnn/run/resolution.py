"""What the options resolve to on this machine: the tables, the backend, its device and peak.

``resolve`` checks what needs more than one option or the machine (a data type the backend
declares, networks the tables hold, the cell's index) and asks the backend its facts once,
so a broken answer fails at the start, saying which. Nothing here imports pytest.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_gostcnn.backend import Backend, BackendError, backend_label, load_backend_class
from pytest_gostcnn.conformance.layer_cases import (
    LayerCase,
    layer_cases,
    network_cases,
    saturating_cases,
)
from pytest_gostcnn.conformance.reference_check import Agreement, checked
from pytest_gostcnn.conformance.verification import layer_steps
from pytest_gostcnn.judgement import Provenance
from pytest_gostcnn.machine import threads
from pytest_gostcnn.machine.facts import suite_source
from pytest_gostcnn.machine.peak import MIN_PEAK, Peak
from pytest_gostcnn.model.dtypes import INFERENCE_DTYPES, TRAINING_DTYPES
from pytest_gostcnn.model.fixed_point import integer_type
from pytest_gostcnn.model.memory import MemoryBoundError, batch_slices, results_held
from pytest_gostcnn.model.network import Network, TableError
from pytest_gostcnn.model.table_files import USER_TABLES, load_networks, table_set
from pytest_gostcnn.performance.cells import Cells
from pytest_gostcnn.reference.library import NUMPY, LibraryError, ReferenceLibrary

from .options import Options, select_networks


@dataclass(frozen=True)
class Resolved:
    """The options resolved on this machine: the backend (None when unavailable, with the
    reason), the networks, the cells, the table set, the device, its facts and peak."""

    backend_name: str  # the backend's declared name (``Backend.name``)
    backend: Backend | None
    unavailable: str | None
    networks: dict[str, Network]
    cells: Cells
    table_set: str = "reconstructions"  # the shipped set's name, or "user" for a directory
    local_cell: int = 0  # the cell index the backend was given: its device
    device: str | None = None  # the backend's device(), asked once
    system: dict = field(default_factory=dict)  # the backend's system(), asked once
    peak: Peak | None = None
    tables_held: int = 0  # how many networks the tables hold, selected or not
    provenances: dict[str, Provenance] = field(default_factory=dict)  # by Latin id
    invocation: dict = field(default_factory=dict)  # how the run was started (``invocation``)
    reference: ReferenceLibrary = NUMPY  # where the float64 reference runs
    agreement: Agreement | None = None  # the reference library's with NumPy's (None: NumPy)
    versus: Backend | None = None  # --gost-versus's baseline backend, started like this one
    versus_device: str | None = None  # its device()
    backend_source: str | None = None  # --gost-backend as given, where not the declared name

    @property
    def backend_label(self) -> str:
        """``mine (mymod:Mine)``: the declared name, and the ``module:Class`` it came from."""
        return backend_label(self.backend_name, self.backend_source)

    @property
    def version(self) -> str | None:
        return type(self.backend).version if self.backend is not None else None

    def without_backend(self, reason: str) -> Resolved:
        """These with the backend unavailable for ``reason`` (another cell lacks it)."""
        return dataclasses.replace(self, backend=None, unavailable=reason, device=None, system={})


def resolve(options: Options, cells: Cells, search: Sequence[tuple[str, Path]] = ()) -> Resolved:
    """What ``options`` resolve to on this machine; ValueError, BackendError or TableError
    naming the option that is wrong. ``search``: where a ``module:Class`` backend's module
    is looked for (``load_backend_class``)."""
    try:
        all_networks = load_networks(options.tables)
    except TableError as exc:
        raise TableError(f"--gost-tables: {exc}") from None
    networks = select_networks(all_networks, options.networks)
    _check_images(options)
    _check_report(options)
    _check_threshold(options)
    name = options.backend
    cls = load_backend_class(name, search)
    _check_dtype(cls, name, options.dtype, options.modes)
    _check_backend_options(cls, name, options.backend_option)
    try:
        unavailable = cls.unavailable_reason()
    except Exception as exc:  # a device probe that fails means no usable device
        unavailable = f"its availability check raised {type(exc).__name__}: {exc}"
    local_cell = _local_cell(options.local_cell, cells)
    backend = None
    if unavailable is None:
        _check_identity(cls, name)
        # Only a backend that declares options takes them (a given key has been checked).
        extra = {"options": options.backend_options} if cls.backend_options else {}
        try:
            backend = cls(options.dtype, cell=local_cell, **extra)
        except BackendError:  # the backend's own words on what it cannot use
            raise
        except Exception as exc:
            raise BackendError(
                f"backend {name!r} failed to start: {type(exc).__name__}: {exc}"
            ) from exc
    reference = dataclasses.replace(options.reference, memory=options.reference_memory)
    agreement = _checked_reference(reference)
    if reference.memory is not None and integer_type(options.dtype) is None:
        training = "training" in options.modes  # fixed point runs whole
        _check_memory(networks, options.batch, reference.memory, training)
    peak = options.peak
    device, system = None, {}
    threads.limit_blas(threads.cell_cores())  # more threads than cores only collapse
    versus, versus_device = None, None
    if backend is not None:
        device, system, estimate = _describe(backend, name, ask_peak=peak is None)
        peak = peak or estimate
        if options.versus is not None:
            versus, versus_device = _versus(options, cells, local_cell, search)
    declared = getattr(cls, "name", None)
    declared = declared if isinstance(declared, str) and declared.strip() else name
    return Resolved(
        backend_name=declared,
        backend_source=None if declared == name else name,
        backend=backend,
        unavailable=unavailable,
        networks=networks,
        cells=cells,
        table_set=table_set(options.tables),
        local_cell=local_cell,
        device=device,
        system=system,
        peak=peak,
        tables_held=len(all_networks),
        provenances={
            latin: Provenance(network.provenance, shipped=table_set(options.tables) != USER_TABLES)
            for latin, network in networks.items()
        },
        invocation=invocation(),
        reference=reference,
        agreement=agreement,
        versus=versus,
        versus_device=versus_device,
    )


def _versus(
    options: Options, cells: Cells, local_cell: int, search: Sequence[tuple[str, Path]]
) -> tuple[Backend, str]:
    """``--gost-versus``'s backend, started on the candidate's cell in its data type, and its
    device; ValueError or BackendError naming the option."""
    flag = f"--gost-versus={options.versus}"
    if cells.size > 1:
        raise ValueError(f"{flag}: the paired gate runs on one computing cell, not under MPI")
    if options.resume is not None:
        raise ValueError(f"{flag}: a paired run is not resumed (--gost-resume); run it whole")
    try:
        cls = load_backend_class(options.versus, search)
        _check_dtype(cls, options.versus, options.dtype, options.modes)
        unavailable = cls.unavailable_reason()
        if unavailable is not None:
            raise BackendError(f"it is unavailable on this machine: {unavailable}")
        _check_identity(cls, options.versus)
        extra = {"options": {}} if cls.backend_options else {}
        backend = cls(options.dtype, cell=local_cell, **extra)
        device = backend.device()
    except (BackendError, ValueError) as exc:
        raise BackendError(f"{flag}: {exc}") from None
    except Exception as exc:
        raise BackendError(f"{flag}: failed to start: {type(exc).__name__}: {exc}") from exc
    return backend, str(device)


def _check_memory(networks: dict[str, Network], batch: int, memory: int, training: bool) -> None:
    """ValueError in one line where the reference's memory bound is too small for one image
    of a selected network at ``batch``, beside the results its network item holds."""
    for network in networks.values():
        held = results_held(network, batch, training)
        try:
            batch_slices(network, batch, memory, error_model=True, held=held)
        except MemoryBoundError as exc:
            raise ValueError(f"--gost-reference-memory: {exc}") from None


def _checked_reference(library: ReferenceLibrary) -> Agreement | None:
    """The reference library's agreement with NumPy, checked before anything is judged by
    it (standard.md §6, "Where the reference runs"); ValueError in one line naming it."""
    try:
        return checked(library)
    except LibraryError as exc:
        raise ValueError(f"--gost-reference={library}: {exc}") from None


def invocation() -> dict:
    """What a report states to reproduce its run: the command line, the environment that
    changes speed or placement, BLAS and its threads (asked after the backend started: it
    may set them), the cell's cores, the suite's version and commit, the load at the start."""
    try:
        load: list[float] | None = list(os.getloadavg())
    except (OSError, AttributeError):
        load = None
    return {
        "command": list(sys.argv),
        "environment": threads.environment(),
        "blas": threads.blas(),
        "cell_cores": threads.cell_cores(),
        "suite": suite_source(),
        "load_average": load,
    }


def _check_identity(cls: type[Backend], name: str) -> None:
    """A backend names itself and its version: the report and 9.7's particulars carry them."""
    for attribute in ("name", "version"):
        value = getattr(cls, attribute, None)
        if not isinstance(value, str) or not value.strip():
            raise BackendError(
                f"backend {name!r}: its class attribute {attribute} is {value!r}; give "
                f"{cls.__qualname__} a non-empty {attribute} (docs/backends.md)"
            )


def case_steps(options: Options, case: LayerCase) -> tuple[str, ...]:
    """The steps a layer item verifies: forward only when the session verifies inference."""
    return ("forward",) if options.modes == ("inference",) else layer_steps(case.layer)


def layer_item_id(case: LayerCase, step: str, dtype: str) -> str:
    """A layer item's id (and its verification's subject): type, step, case, data type."""
    return f"{case.layer.type.name}-{step}-{case.tag}-{dtype}"


def layer_params(options: Options, networks: dict[str, Network]) -> list[tuple[LayerCase, str]]:
    """The suite's layer items: the steps of every small layer case and of every distinct
    layer of the selected networks at its own shape; the saturating cases in an integer
    type only."""
    saturating = saturating_cases() if integer_type(options.dtype) is not None else []
    cases = layer_cases() + saturating + network_cases(networks)
    return [(case, step) for case in cases for step in case_steps(options, case)]


def _describe(backend: Backend, name: str, ask_peak: bool) -> tuple[str, dict, Peak | None]:
    """The backend's ``device()``, ``system()`` and (if asked) ``peak()``, each asked once."""
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


def _local_cell(given: int | None, cells: Cells) -> int:
    """The index among its node's cells that the backend is given (it picks the device):
    the MPI local rank, or ``--gost-local-cell`` in a single-process run."""
    if given is None:
        return cells.local_rank
    if cells.size > 1:
        raise ValueError(
            f"--gost-local-cell={given}: under an MPI launcher each rank is the cell of its "
            "local rank; give this option only to a single-process run"
        )
    return given


def _check_images(options: Options) -> None:
    """``--gost-images`` replaces the profile, and asks at least one batch per test."""
    if options.images is None:
        return
    if "profile" in options.given:
        raise ValueError(
            f"--gost-images={options.images} and --gost-profile={options.profile}: give one "
            "of them (on the command line or in the ini file); an image count replaces the "
            "profile"
        )
    if options.images < options.batch:
        raise ValueError(
            f"--gost-images={options.images}: fewer than one batch of --gost-batch="
            f"{options.batch}; give at least {options.batch} images"
        )


def _check_report(options: Options) -> None:
    """``--gost-report`` is written over as the run goes: never the baseline it is compared
    with (both paths are resolved as parsed)."""
    if options.report is None or options.compare is None:
        return
    report, baseline = Path(options.report), Path(options.compare)
    if report == baseline or (report.exists() and os.path.samefile(report, baseline)):
        raise ValueError(
            f"--gost-report={options.report}: the --gost-compare baseline itself; the run "
            "would write over the report it is compared with: give the new report another name"
        )


def _check_backend_options(
    cls: type[Backend], name: str, given: tuple[tuple[str, str], ...]
) -> None:
    """Every ``--gost-backend-option`` key is one the backend declares."""
    declared = cls.backend_options
    for key, value in given:
        if key not in declared:
            known = (
                "its keys: " + "; ".join(f"{k} ({what})" for k, what in declared.items())
                if declared
                else "it declares no option"
            )
            raise ValueError(
                f"--gost-backend-option={key}={value}: backend {name!r} has no option "
                f"{key!r}; {known}"
            )


def _check_threshold(options: Options) -> None:
    """An integer type cannot be held to СКОП 0: every layer that requantises rounds."""
    if options.rmse_threshold == 0 and integer_type(options.dtype) is not None:
        raise ValueError(
            f"--gost-rmse-threshold=0: in {options.dtype} every layer that requantises rounds "
            "(the fixed-point model, docs/standard.md §6), so no such item can be "
            "reference-grade; give a share above 0, or leave СКОП to the model"
        )


def _check_dtype(cls: type[Backend], name: str, dtype: str, modes: tuple[str, ...]) -> None:
    for mode, declared, allowed in (
        ("inference", cls.inference_dtypes, INFERENCE_DTYPES),
        ("training", cls.training_dtypes, TRAINING_DTYPES),
    ):
        if mode not in modes:
            continue
        if dtype not in allowed:
            explicit = modes == ("training",)
            raise ValueError(
                f"--gost-dtype={dtype}: the standard allows only {', '.join(allowed)} for "
                f"{mode}; {'use' if explicit else 'add'} --gost-mode=inference"
            )
        if not declared:  # an inference-only backend, say
            raise ValueError(
                f"--gost-mode={'both' if len(modes) > 1 else mode}: backend {name!r} declares "
                f"no data type for {mode}; give --gost-mode="
                f"{'inference' if mode == 'training' else 'training'}"
            )
        if dtype not in declared:
            raise ValueError(
                f"--gost-dtype={dtype}: backend {name!r} does not declare it for {mode} "
                f"(it declares {', '.join(declared)})"
            )
