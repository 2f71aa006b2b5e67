"""The CuPy GPU backend: the shared xp kernels on one CUDA device, GEMMs through cuBLAS.

Everything but the GPU itself is shared with the CPU tests: the layer kernels are
``backends/_xp_kernels.py`` (run with NumPy in ``tests/test_cupy_backend.py``). What only
a GPU runs is here and small: choosing the device, the cuBLAS GEMM with its compute type
per data type, synchronising the stream, and reading the device's properties for the peak
and the report. docs/gpu.md says which of it has run on a GPU.

Without CuPy, or without a CUDA device, the module still imports and
``CupyBackend.unavailable_reason()`` says why; the plugin then skips every item.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

import numpy as np

from pytest_gostcnn.machine.peak import Peak, gpu_peak

from ._cuda_kernels import CudaKernels, elementwise_kernel
from ._xp_kernels import WORKSPACE_BYTES, XpBackend, device_for_cell

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

# cudaDataType_t of the GEMM operands per data type; the product is always CUDA_R_32F.
CUDA_R_32F, CUDA_R_16F, CUDA_R_16BF = 0, 2, 14
OPERAND_TYPES = {"float32": CUDA_R_32F, "tf32": CUDA_R_32F, "float16": CUDA_R_16F}
OPERAND_TYPES["bfloat16"] = CUDA_R_16BF
# cublasOperation_t.
OP_N, OP_T = 0, 1
# cublasComputeType_t and cublasGemmAlgo_t (cublas_api.h), where CuPy lacks the names.
COMPUTE_32F, COMPUTE_32F_FAST_TF32, GEMM_DEFAULT = 68, 77, -1
# The im2col / col2im chunk bound on a GPU: this share of its memory, at most MAX_WORKSPACE.
WORKSPACE_SHARE, MAX_WORKSPACE = 32, 4 << 30


class GemmExArguments(NamedTuple):
    """cublasGemmEx's shape arguments for row-major ``C[m][n] = A[m][k] @ B[k][n]``.

    cuBLAS is column-major: a row-major C is its C^T, so it computes C^T = B^T A^T, with
    B's memory as its first operand and A's as its second.
    """

    transa: int
    transb: int
    m: int
    n: int
    k: int
    first: Any  # B, contiguous one way or the other
    lda: int
    second: Any  # A
    ldb: int
    ldc: int


def column_major_operand(xp: Any, x) -> tuple[int, int, Any]:
    """``(op, ld, x)`` so that ``op`` of ``x``'s memory read column-major is ``x^T``.

    A row-major (C-contiguous) [r][c] array read column-major with ld = c is its transpose:
    no operation. A transposed view (F-contiguous) read with ld = r is the array itself:
    transpose it. Anything else is copied to C order first.
    """
    if not (x.flags.c_contiguous or x.flags.f_contiguous):
        x = xp.ascontiguousarray(x)
    rows, cols = x.shape
    if x.flags.c_contiguous:
        return OP_N, max(cols, 1), x
    return OP_T, max(rows, 1), x


def gemm_ex_arguments(xp: Any, a, b) -> GemmExArguments:
    m, k = a.shape
    n = b.shape[1]
    op_a, ld_a, a = column_major_operand(xp, a)
    op_b, ld_b, b = column_major_operand(xp, b)
    return GemmExArguments(op_b, op_a, n, m, k, b, ld_b, a, ld_a, max(n, 1))


class CublasGemm:
    """The GEMM hook on a GPU: ``cublasGemmEx``, float32 product, compute type per dtype.

    float32: CUBLAS_COMPUTE_32F (CUDA cores, no TF32); tf32: CUBLAS_COMPUTE_32F_FAST_TF32;
    float16 and bfloat16: CUBLAS_COMPUTE_32F on 16-bit operands (tensor cores, float32
    accumulation). bfloat16 values live in float32 arrays; their top 16 bits are the
    bfloat16 operands.
    """

    def __init__(self, dtype: str) -> None:
        from cupy.cuda import cublas  # loads libcublas, which a machine may lack

        self.cublas = cublas
        self.dtype = dtype
        self.operand_type = OPERAND_TYPES[dtype]
        self.compute_type = (
            getattr(cublas, "CUBLAS_COMPUTE_32F_FAST_TF32", COMPUTE_32F_FAST_TF32)
            if dtype == "tf32"
            else getattr(cublas, "CUBLAS_COMPUTE_32F", COMPUTE_32F)
        )
        self.algorithm = getattr(cublas, "CUBLAS_GEMM_DEFAULT", GEMM_DEFAULT)
        # alpha and beta in host memory, in the compute type (float32).
        self.one = np.ones((), dtype=np.float32)
        self.zero = np.zeros((), dtype=np.float32)
        self.halves = elementwise_kernel(cupy, "bfloat16 halves") if dtype == "bfloat16" else None

    def __call__(self, a, b):
        if self.dtype == "bfloat16":
            a, b = self.halves(a), self.halves(b)
        c = cupy.empty((a.shape[0], b.shape[1]), dtype=cupy.float32)
        if c.size == 0 or a.shape[1] == 0:
            c.fill(0)
            return c
        g = gemm_ex_arguments(cupy, a, b)
        self.cublas.gemmEx(
            cupy.cuda.device.get_cublas_handle(),
            g.transa,
            g.transb,
            g.m,
            g.n,
            g.k,
            self.one.ctypes.data,
            g.first.data.ptr,
            self.operand_type,
            g.lda,
            g.second.data.ptr,
            self.operand_type,
            g.ldb,
            self.zero.ctypes.data,
            c.data.ptr,
            CUDA_R_32F,
            g.ldc,
            self.compute_type,
            self.algorithm,
        )
        return c


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
