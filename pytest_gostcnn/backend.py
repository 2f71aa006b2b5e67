"""The backend contract and how a backend is found (``--gost-backend``).

A backend subclasses ``Backend`` and provides the layer kernels the one executor runs (or
overrides ``infer``/``train``); it registers under the entry-point group
``pytest_gostcnn.backends``, or is named as ``package.module:Class``, or as
``FOLDER::module:Class``: the module loaded from FOLDER under a name of its own, so that
two folders' versions of one module run side by side (``--gost-versus``).
"""

from __future__ import annotations

import abc
import hashlib
import importlib
import importlib.util
import sys
from collections.abc import Sequence
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path

import numpy as np

from pytest_gostcnn.machine.peak import Peak, cpu_peak
from pytest_gostcnn.model import executor
from pytest_gostcnn.model.fixed_point import ScaleTable
from pytest_gostcnn.model.layers import Layer
from pytest_gostcnn.model.network import Network

ENTRY_POINT_GROUP = "pytest_gostcnn.backends"


class BackendError(ValueError):
    """A backend that cannot be found, imported or used; the message says which and why."""


class Backend(abc.ABC):
    """One implementation of the nine layers on one device, in one data type.

    Arrays handed to the kernels are the backend's own (``to_device`` made them), shaped
    like the standard's arrays: maps [B][X][Y][L], weights as ``Layer.weight_shapes`` says.
    The verification and the benchmarks only move data with ``to_device`` / ``to_host`` and
    time with ``synchronize``.
    """

    #: The name ``--gost-backend`` selects it by, and its version for the report.
    name: str = ""
    version: str = ""
    #: The data types it computes, for inference and for training (subsets of standard.md §8's).
    #: ``int8`` / ``int16`` among ``inference_dtypes``: the backend runs the fixed-point
    #: model of docs/standard.md §6 (docs/backends.md, "Integer types").
    inference_dtypes: tuple[str, ...] = ("float32",)
    training_dtypes: tuple[str, ...] = ("float32",)
    #: The keys ``--gost-backend-option KEY=VALUE`` may give it, each with what it sets.
    #: A backend that declares any takes them as ``options``, a dict of the given ones.
    backend_options: dict[str, str] = {}

    def __init__(self, dtype: str = "float32", cell: int = 0) -> None:
        """``cell``: this process's index among the cells of its node (its MPI local rank),
        by which a backend picks its device, e.g. GPU number ``cell``."""
        self.dtype = dtype
        self.cell = cell
        #: An integer type's scales, by row number: the last table ``use_scales`` gave.
        self.scales: ScaleTable = {}

    def use_scales(self, scales: ScaleTable) -> None:
        """An integer type only: the scales of the arrays the suite hands over next.

        Called before the weights and the input of every integer verification and
        benchmark, with one ``fixed_point.LayerScales`` per row (its input maps', output
        maps' and weight arrays' scales); the kernels of a row read ``self.scales[number]``.
        The default keeps the table; a backend that folds the scales into its weights or
        kernels overrides it (and calls this one).
        """
        self.scales = dict(scales)

    @classmethod
    def unavailable_reason(cls) -> str | None:
        """Why this backend cannot run on this machine (e.g. "no CUDA device"), or None."""
        return None

    @abc.abstractmethod
    def device(self) -> str:
        """The computing cell in words, e.g. "CPU: AMD EPYC 7763 (2 cores)"."""

    @abc.abstractmethod
    def to_device(self, host: np.ndarray):
        """A device array in this backend's dtype holding ``host``: a float64 NumPy array,
        or in an integer type a NumPy array of its integers (int8/int16 maps and weights,
        biases in the accumulator type int32/int64: docs/backends.md, "Integer types")."""

    @abc.abstractmethod
    def to_host(self, array) -> np.ndarray:
        """A NumPy array with the values of a device array (in the device's dtype; in an
        integer type the map's integers, int8 or int16, at the scale ``use_scales`` gave)."""

    def peak(self) -> Peak | None:
        """The estimated theoretical peak of this cell in MAC/s, or None if unknown.

        The default estimates a CPU from /proc/cpuinfo; accelerator backends override it.
        """
        return cpu_peak(self.dtype)

    def system(self) -> dict:
        """Facts about the device for the report (e.g. GPU model, driver); default none."""
        return {}

    def synchronize(self) -> None:
        """Wait until all queued work is done (closes every timed region).

        A backend whose kernels return only when their work is done needs nothing here.
        """
        return None

    # The layer kernels of executor.Kernels; a list of maps may be returned as a tuple.
    @abc.abstractmethod
    def forward(self, layer: Layer, inputs: list, weights: dict) -> list: ...

    @abc.abstractmethod
    def backward(
        self, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
    ) -> list: ...

    @abc.abstractmethod
    def gradient(self, layer: Layer, inputs: list, out_residuals: list) -> dict: ...

    @abc.abstractmethod
    def update(self, layer: Layer, weights: dict, grads: dict, batch: int) -> None: ...

    # Whole networks: the shared schedule unless a backend overrides these.
    def load_weights(self, network: Network, host: executor.Weights) -> executor.Weights:
        return {
            number: {name: self.to_device(array) for name, array in arrays.items()}
            for number, arrays in host.items()
        }

    def infer(self, network: Network, weights: executor.Weights, image):
        return executor.infer(network, self, weights, image)

    def train(
        self, network: Network, weights: executor.Weights, image, out_residual
    ) -> executor.TrainingResult:
        return executor.train(network, self, weights, image, out_residual)


def _import(module_name: str, search: Sequence[tuple[str, Path]]):
    """``module_name`` imported; when its top package is not importable, from the first
    folder of ``search`` that holds it, put first on ``sys.path`` (pytest's ``prepend``)."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        top = module_name.partition(".")[0]
        if exc.name != top:
            raise
        for _, folder in search:
            if (folder / f"{top}.py").is_file() or (folder / top).is_dir():
                sys.path.insert(0, str(folder))
                return importlib.import_module(module_name)
        raise


def _import_from(folder: Path, module_name: str):
    """``module_name`` from ``folder``, under a name of its own (the folder's hash before
    the top package's name), so that two folders' modules of one name are two modules;
    imports inside it relative to its package follow it there."""
    top, _, rest = module_name.partition(".")
    folder = folder.expanduser().resolve()
    private = f"_gost_{hashlib.sha1(str(folder).encode()).hexdigest()[:12]}_{top}"
    if private not in sys.modules:
        package = folder / top / "__init__.py"
        if package.is_file():
            spec = importlib.util.spec_from_file_location(
                private, package, submodule_search_locations=[str(package.parent)]
            )
        elif (folder / f"{top}.py").is_file():
            spec = importlib.util.spec_from_file_location(private, folder / f"{top}.py")
        else:
            raise ModuleNotFoundError(f"no module {top!r} in {folder}", name=top)
        module = importlib.util.module_from_spec(spec)
        sys.modules[private] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[private]
            raise
    return importlib.import_module(f"{private}.{rest}" if rest else private)


def registered_backends() -> dict[str, EntryPoint]:
    """The backends registered under the entry-point group, by name."""
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def load_backend_class(name: str, search: Sequence[tuple[str, Path]] = ()) -> type[Backend]:
    """The backend class for ``--gost-backend=NAME``: a registered name or ``module:Class``.

    Args:
        name: the registered name, or ``module:Class``.
        search: (what it is, folder) where ``module`` is looked for when it is not
            importable, in order, as pytest finds test code: the invocation directory, the
            rootdir. The folder it is found in goes first on ``sys.path``.
    """
    available = ", ".join(sorted(registered_backends())) or "none"
    hint = (
        f"available backends: {available}; or name a class as package.module:Class or "
        "FOLDER::module:Class"
    )
    if "::" in name:
        folder, _, name_in_folder = name.partition("::")
        if ":" not in name_in_folder:
            raise BackendError(f"backend {name!r}: give FOLDER::module:Class ({hint})")
        if not Path(folder).expanduser().is_dir():
            raise BackendError(f"backend {name!r}: no folder {folder!r} ({hint})")
    if ":" in name:
        module_name, _, attribute = name.rpartition("::")[2].partition(":")
        try:
            if "::" in name:
                module = _import_from(Path(name.partition("::")[0]), module_name)
            else:
                module = _import(module_name, search)
        except ModuleNotFoundError as exc:
            top = module_name.partition(".")[0]
            if exc.name != top:
                raise BackendError(
                    f"backend {name!r}: module {module_name!r} failed to import: "
                    f"{type(exc).__name__}: {exc} ({hint})"
                ) from exc
            looked = ", ".join(["sys.path", *(f"the {what} {folder}" for what, folder in search)])
            if "::" in name:
                looked = f"the folder {name.partition('::')[0]}"
            raise BackendError(
                f"backend {name!r}: no module {top!r} ({top}.py or a package {top}/) in "
                f"{looked} ({hint})"
            ) from None
        except Exception as exc:  # any import-time failure is the backend's, reported as such
            raise BackendError(
                f"backend {name!r}: module {module_name!r} failed to import: "
                f"{type(exc).__name__}: {exc} ({hint})"
            ) from exc
        try:
            cls = getattr(module, attribute)
        except AttributeError:
            raise BackendError(
                f"backend {name!r}: module {module_name!r} has no {attribute!r} ({hint})"
            ) from None
    else:
        registered = registered_backends()
        if name not in registered:
            raise BackendError(f"unknown backend {name!r}; {hint}")
        try:
            cls = registered[name].load()
        except Exception as exc:
            raise BackendError(
                f"backend {name!r} ({registered[name].value}) failed to import: "
                f"{type(exc).__name__}: {exc} ({hint})"
            ) from exc
    if not (isinstance(cls, type) and issubclass(cls, Backend)):
        raise BackendError(
            f"backend {name!r} is {getattr(cls, '__qualname__', type(cls).__name__)!r}, not a "
            f"subclass of pytest_gostcnn.backend.Backend ({hint})"
        )
    return cls


def backend_label(name: str, source: str | None, version: str | None = None) -> str:
    """``mine (mymod:Mine)``: a backend's declared ``name`` (and ``version``, where given),
    and the ``--gost-backend`` it was given as (``source``) where that differs from the name."""
    named = name if version is None else f"{name} {version}"
    return named if source in (None, name) else f"{named} ({source})"
