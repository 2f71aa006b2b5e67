"""The GEMM hook of the CuPy backend on a GPU: ``cublasGemmEx`` through CuPy's bindings.

Only ``CublasGemm`` needs CuPy (imported when one is made); the argument mapping is plain
Python, checked in CI against a NumPy emulation of ``cublasGemmEx``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .cuda_kernels import elementwise_kernel

# cudaDataType_t of the GEMM operands per data type; the product is always CUDA_R_32F.
CUDA_R_32F, CUDA_R_16F, CUDA_R_16BF = 0, 2, 14
OPERAND_TYPES = {"float32": CUDA_R_32F, "tf32": CUDA_R_32F, "float16": CUDA_R_16F}
OPERAND_TYPES["bfloat16"] = CUDA_R_16BF
# cublasOperation_t.
OP_N, OP_T = 0, 1
# cublasComputeType_t and cublasGemmAlgo_t (cublas_api.h), where CuPy lacks the names.
COMPUTE_32F, COMPUTE_32F_FAST_TF32, GEMM_DEFAULT = 68, 77, -1


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
        import cupy
        from cupy.cuda import cublas  # loads libcublas, which a machine may lack

        self.cupy = cupy
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
        cupy = self.cupy
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
