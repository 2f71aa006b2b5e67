"""The NumPy CPU backend, correct first: Appendix A's vectorised arithmetic in float32.

It runs the reference's kernels (``pytest_gostcnn.reference``) on float32 arrays; they keep
their arguments' dtype. Speed (GEMM layouts, threads) is the business of a later change.
"""

from __future__ import annotations

import os
import platform

import numpy as np

from pytest_gostcnn.backend import Backend
from pytest_gostcnn.layers import Layer
from pytest_gostcnn.reference import ReferenceKernels

_KERNELS = ReferenceKernels()


class NumpyBackend(Backend):
    name = "numpy"
    version = np.__version__
    inference_dtypes = ("float32",)
    training_dtypes = ("float32",)

    def device(self) -> str:
        return f"CPU: {_cpu_model()} ({os.cpu_count()} cores)"

    def to_device(self, host: np.ndarray) -> np.ndarray:
        return np.array(host, dtype=np.float32)

    def to_host(self, array: np.ndarray) -> np.ndarray:
        return np.asarray(array)

    def forward(self, layer: Layer, inputs: list, weights: dict) -> list:
        return _KERNELS.forward(layer, inputs, weights)

    def backward(
        self, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
    ) -> list:
        return _KERNELS.backward(layer, inputs, outputs, out_residuals, weights)

    def gradient(self, layer: Layer, inputs: list, out_residuals: list) -> dict:
        return _KERNELS.gradient(layer, inputs, out_residuals)

    def update(self, layer: Layer, weights: dict, grads: dict, batch: int) -> None:
        _KERNELS.update(layer, weights, grads, batch)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"
