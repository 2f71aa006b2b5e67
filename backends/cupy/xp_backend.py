"""A backend over the xp kernels (``xp_kernels.py``) and any array module ``xp``: the CuPy
backend is this with CuPy, a GPU and cuBLAS (``backend.py``); the tests run it with NumPy.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pytest_gostcnn.backend import BackendError

from ..common import KernelSetBackend
from .rounding import host_to_storage
from .xp_kernels import INFERENCE_DTYPES, TRAINING_DTYPES, WORKSPACE_BYTES, Gemm, XpKernels


def device_for_cell(cell: int, device_count: int) -> int:
    """The GPU a computing cell uses: its node-local rank wrapped over the visible GPUs.

    docs/cells.md: with ``--gpus-per-task=1`` every task sees one GPU as device 0.
    """
    if device_count < 1:
        raise BackendError("no CUDA device")
    return cell % device_count


class XpBackend(KernelSetBackend):
    """A backend whose kernels are ``XpKernels`` over the array module ``xp``.

    ``CupyBackend`` is this with CuPy, a GPU and cuBLAS; the tests run it with NumPy.
    """

    xp: Any = None
    inference_dtypes = INFERENCE_DTYPES
    training_dtypes = TRAINING_DTYPES

    def __init__(self, dtype: str = "float32", cell: int = 0) -> None:
        super().__init__(dtype, cell)
        self.kernels = self.make_kernels()

    def make_kernels(self) -> XpKernels:
        return XpKernels(
            self.xp, self.dtype, gemm=self.make_gemm(), workspace_bytes=self.workspace_bytes()
        )

    def make_gemm(self) -> Gemm | None:
        """The GEMM hook; None: ``xp.matmul`` in float32."""
        return None

    def workspace_bytes(self) -> int:
        """The bound on one chunk's im2col / col2im buffers."""
        return WORKSPACE_BYTES

    def to_device(self, host: np.ndarray):
        return self.xp.asarray(host_to_storage(host, self.dtype))

    def to_host(self, array) -> np.ndarray:
        return np.asarray(array)
