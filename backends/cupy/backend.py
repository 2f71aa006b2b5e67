"""The CuPy GPU backend: the xp kernels (``xp_kernels.py``, fused in ``cuda_kernels.py``)
on one CUDA device, GEMMs through cuBLAS (``cublas.py``); here the device, the stream and
the device's properties for the peak and the report.

Without CuPy, or without a CUDA device, the module still imports and
``CupyBackend.unavailable_reason()`` says why; the plugin then skips every item.
"""

from __future__ import annotations

import re

import numpy as np

from pytest_gostcnn.machine.peak import Peak, gpu_peak

from .cublas import CublasGemm
from .cuda_kernels import CudaKernels
from .xp_backend import XpBackend, device_for_cell
from .xp_kernels import WORKSPACE_BYTES

INSTALL_HINT = "CuPy is not installed: pip install 'pytest-gostcnn[cupy]'"
NO_DEVICE = "no CUDA device"
DRIVER_VERSION_FILE = "/proc/driver/nvidia/version"

try:
    import cupy
except ModuleNotFoundError:
    cupy = None
    _import_problem = INSTALL_HINT
except Exception as exc:  # a broken installation: say so instead of failing to import
    cupy = None
    _import_problem = f"CuPy failed to import: {type(exc).__name__}: {exc}"
else:
    _import_problem = None

# The im2col / col2im chunk bound on a GPU: this share of its memory, at most MAX_WORKSPACE.
WORKSPACE_SHARE, MAX_WORKSPACE = 32, 4 << 30


def nvidia_driver_version(text: str) -> str | None:
    """The driver version in /proc/driver/nvidia/version ("... Kernel Module  550.54.15 ...")."""
    found = re.search(r"Kernel Module(?: for \S+)?\s+(\d+(?:\.\d+)+)", text)
    return found.group(1) if found else None


def _version(number: int) -> str:
    """A CUDA version number (12040) as text (12.4)."""
    return f"{number // 1000}.{number % 1000 // 10}"


class CupyBackend(XpBackend):
    """The shared xp kernels on GPU number ``cell % device count``, GEMMs in cuBLAS."""

    name = "cupy"
    version = getattr(cupy, "__version__", "")
    xp = cupy

    @classmethod
    def unavailable_reason(cls) -> str | None:
        if cupy is None:
            return _import_problem
        try:
            count = cupy.cuda.runtime.getDeviceCount()
        except cupy.cuda.runtime.CUDARuntimeError:  # no driver, or no device
            return NO_DEVICE
        if count < 1:
            return NO_DEVICE
        try:
            from cupy.cuda import cublas  # noqa: F401
        except ImportError as exc:
            return (
                f"cuBLAS could not be loaded ({exc}); install the CUDA libraries, e.g. "
                "pip install 'cupy-cuda12x[ctk]'"
            )
        return None

    def __init__(self, dtype: str = "float32", cell: int = 0) -> None:
        self.device_index = device_for_cell(cell, cupy.cuda.runtime.getDeviceCount())
        cupy.cuda.Device(self.device_index).use()
        self.properties = cupy.cuda.runtime.getDeviceProperties(self.device_index)
        super().__init__(dtype, cell)

    def make_gemm(self) -> CublasGemm:
        return CublasGemm(self.dtype)

    def make_kernels(self) -> CudaKernels:
        return CudaKernels(cupy, self.dtype, self.make_gemm(), self.workspace_bytes())

    def workspace_bytes(self) -> int:
        # Larger chunks than the CPU default: fewer, larger GEMMs on a device with the memory.
        return max(
            WORKSPACE_BYTES,
            min(MAX_WORKSPACE, self.properties["totalGlobalMem"] // WORKSPACE_SHARE),
        )

    def _gpu_name(self) -> str:
        name = self.properties["name"]
        return name.decode() if isinstance(name, bytes) else str(name)

    def device(self) -> str:
        sms = self.properties["multiProcessorCount"]
        return f"GPU {self.device_index}: {self._gpu_name()} ({sms} SMs)"

    def to_host(self, array) -> np.ndarray:
        return cupy.asnumpy(array)

    def synchronize(self) -> None:
        cupy.cuda.get_current_stream().synchronize()

    def peak(self) -> Peak | None:
        props = self.properties
        clock_khz = props.get("clockRate") or cupy.cuda.runtime.deviceGetAttribute(
            cupy.cuda.runtime.cudaDevAttrClockRate, self.device_index
        )
        return gpu_peak(
            self.dtype,
            self._gpu_name(),
            props["multiProcessorCount"],
            clock_khz * 1e3,
            capability=(props["major"], props["minor"]),
        )

    def system(self) -> dict:
        runtime = cupy.cuda.runtime
        try:
            with open(DRIVER_VERSION_FILE, encoding="utf-8") as file:
                driver = nvidia_driver_version(file.read())
        except OSError:
            driver = None
        return {
            "gpu": self._gpu_name(),
            "gpu_index": self.device_index,
            "sm_count": self.properties["multiProcessorCount"],
            "compute_capability": f"{self.properties['major']}.{self.properties['minor']}",
            "driver": driver,
            "cuda_driver_api": _version(runtime.driverGetVersion()),
            "cuda_runtime": _version(runtime.runtimeGetVersion()),
            "cupy": self.version,
        }
