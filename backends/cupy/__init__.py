"""The CuPy GPU backend: ``backend.py``, the kernels written against an array module
``xp_kernels.py`` (run with NumPy in the tests), the fused CUDA kernels ``cuda_kernels.py``
with their source ``kernels.cu``, the cuBLAS GEMM ``cublas.py``, the bfloat16 and TF32
rounding ``rounding.py``. It imports without CuPy."""

from .backend import CupyBackend

__all__ = ["CupyBackend"]
