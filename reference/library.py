"""The array library the float64 reference runs on (standard.md §6, "Where the reference
runs"): NumPy by default, PyTorch or CuPy on their devices, through array-api-compat.

The reference's kernels find the library from the arrays they are given
(``array_namespace``); the suite's draws are NumPy arrays on the host, and ``asarray``
takes each onto the library's device before the reference reads it.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from functools import cached_property
from types import ModuleType
from typing import Any

import array_api_compat
import array_api_compat.numpy  # noqa: F401 (loaded here: array_namespace would on first use)
import numpy as np

# The libraries the reference runs on, their array-api-compat namespace and how to get them.
NAMESPACES = {
    "numpy": "array_api_compat.numpy",
    "torch": "array_api_compat.torch",
    "cupy": "array_api_compat.cupy",
}
INSTALL = {
    "numpy": "pip install numpy",
    "torch": "pip install torch (docs/backends.md, The PyTorch backend)",
    "cupy": "pip install 'pytest-gostcnn[cupy]'",
}
DEFAULT_DEVICES = {"numpy": "cpu", "torch": "cpu", "cupy": "cuda:0"}

Array = Any  # an array of the reference's library: numpy.ndarray, torch.Tensor, cupy.ndarray


class LibraryError(Exception):
    """A reference library that cannot run here: not installed, or no such device."""


@dataclass(frozen=True)
class ReferenceLibrary:
    """An array library and a device of it, for the float64 reference, and the memory the
    reference may take there (bytes, ``--gost-reference-memory``: ``model/memory.py``)."""

    name: str = "numpy"
    device: str = "cpu"
    memory: int | None = None  # None: DEFAULT_BOUND, or an image a slice where one needs more

    @property
    def text(self) -> str:
        """As ``--gost-reference`` spells it: ``numpy``, ``torch``, ``torch:cuda:0``."""
        if self.device == DEFAULT_DEVICES[self.name]:
            return self.name
        return f"{self.name}:{self.device}"

    @property
    def is_numpy(self) -> bool:
        return self.name == "numpy"

    @cached_property
    def namespace(self) -> ModuleType:
        """The library's array-API namespace; ``LibraryError`` when it is not installed."""
        if self.name == "torch":
            # OpenMP's waiting threads sleep, as the PyTorch backend's do (docs/backends.md):
            # spinning ones collapse on a shared cell. Read when PyTorch first loads.
            os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        try:
            importlib.import_module(self.name)
            return importlib.import_module(NAMESPACES[self.name])
        except ImportError as exc:
            raise LibraryError(
                f"the reference library {self.name} is not installed ({exc}); {INSTALL[self.name]}"
            ) from None

    @property
    def version(self) -> str:
        return importlib.import_module(self.name).__version__

    @cached_property
    def native_device(self) -> Any:
        """The device as the library names it; ``LibraryError`` when it has no such device."""
        xp, module = self.namespace, importlib.import_module(self.name)
        try:
            if self.name == "torch":
                device = module.device(self.device)
            elif self.name == "cupy":
                device = module.cuda.Device(int(self.device.removeprefix("cuda:")))
            elif self.device == "cpu":
                device = "cpu"
            else:
                raise ValueError("NumPy runs on the CPU only")
            xp.zeros(1, dtype=xp.float64, device=device) + 1  # fails on a device not there
        except LibraryError:
            raise
        except Exception as exc:
            raise LibraryError(
                f"the reference library {self.name} has no device {self.device!r}: "
                f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            ) from None
        return device

    def asarray(self, host: np.ndarray) -> Any:
        """A host array as a float64 array of this library on its device (NumPy: itself)."""
        if self.is_numpy:
            return np.asarray(host, dtype=np.float64)
        xp = self.namespace
        return xp.asarray(np.asarray(host, dtype=np.float64), device=self.native_device)

    def __str__(self) -> str:
        return self.text

    def as_dict(self) -> dict:
        return {"library": self.name, "version": self.version, "device": self.device}


NUMPY = ReferenceLibrary()


def to_numpy(array: Any) -> np.ndarray:
    """A reference array (of any library, on any device) as a NumPy array on the host."""
    if isinstance(array, np.ndarray):
        return array
    return np.asarray(array_api_compat.to_device(array, "cpu"))


def parse(text: str) -> ReferenceLibrary:
    """``numpy``, ``torch``, ``torch:cuda:0``, ``cupy``, ``cupy:cuda:1``; ValueError else."""
    name, _, device = text.strip().partition(":")
    if name not in NAMESPACES:
        raise ValueError(
            f"{text}: not a reference library; expected {', '.join(NAMESPACES)}, each with an "
            "optional :DEVICE (torch:cuda:0)"
        )
    if name == "numpy" and device not in ("", "cpu"):
        raise ValueError(f"{text}: NumPy runs on the CPU only; for a GPU name torch:cuda:0 or cupy")
    return ReferenceLibrary(name, device or DEFAULT_DEVICES[name])
