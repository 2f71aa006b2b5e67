"""The NumPy CPU backend: float32, channels last, GEMMs in BLAS, every pass split over
one thread pool (kernels in ``kernels/``, their buffers and threads in ``workspace.py``),
verified against the float64 reference (``reference/``, section 8). Inference also in int8
and int16, under the fixed-point model (``integer.py``).
"""

from __future__ import annotations

import numpy as np

from pytest_gostcnn.backend import Backend
from pytest_gostcnn.machine.facts import cpu_model
from pytest_gostcnn.machine.threads import cell_cores, limit_blas
from pytest_gostcnn.model import executor
from pytest_gostcnn.model.fixed_point import integer_type
from pytest_gostcnn.model.layers import Layer
from pytest_gostcnn.model.network import Network

from ..common import kernel
from . import kernels
from .integer import IntegerKernels
from .workspace import Workspace, worker_threads


class NumpyBackend(Backend):
    name = "numpy"
    version = np.__version__
    inference_dtypes = ("float32", "int8", "int16")
    training_dtypes = ("float32",)

    def __init__(self, dtype: str = "float32", cell: int = 0, threads: int | None = None) -> None:
        """``threads``: the pool's threads (default: the cell's cores, capped by
        ``OMP_NUM_THREADS`` / ``OPENBLAS_NUM_THREADS`` / ``MKL_NUM_THREADS``).

        BLAS runs one thread from here on, in the whole process (the float64 reference of
        the verification and the checks too): the pool splits every GEMM itself, and the
        pool's threads and BLAS's never add up to more than the cell's cores."""
        super().__init__(dtype, cell)
        self.workspace = Workspace(threads or worker_threads())
        limit_blas(1)
        itype = integer_type(dtype)
        self.integer = None if itype is None else IntegerKernels(itype, self.workspace)
        self._network: Network | None = None  # whose weights were loaded last

    def load_weights(self, network: Network, host: executor.Weights) -> executor.Weights:
        # A session verifies and times one network after another: the result arrays kept
        # for the last one's shapes go when another's weights come (the same network's,
        # reloaded at a training segment's start, keep them: no timed round allocates).
        if network is not self._network:
            self.workspace.forget_free_results()
            self._network = network
        return super().load_weights(network, host)

    def device(self) -> str:
        return f"CPU: {cpu_model()} ({cell_cores()} cores)"

    def system(self) -> dict:
        return {"threads": self.workspace.threads}

    def to_device(self, host: np.ndarray) -> np.ndarray:
        if self.integer is None:
            return np.array(host, dtype=np.float32)
        host = np.asarray(host)
        if not np.issubdtype(host.dtype, np.integer):
            raise TypeError(
                f"to_device in {self.dtype}: expected the integers of an array, got {host.dtype}"
            )
        return np.array(host)

    def to_host(self, array: np.ndarray) -> np.ndarray:
        return np.asarray(array)

    def forward(self, layer: Layer, inputs: list, weights: dict) -> list:
        if self.integer is not None:
            return self.integer.forward(layer, inputs, weights, self.scales[layer.number])
        return kernel(kernels, layer, "forward")(self.workspace, layer, inputs, weights)

    def backward(
        self, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
    ) -> list:
        step = kernel(kernels, layer, "backward")
        return step(self.workspace, layer, inputs, outputs, out_residuals, weights)

    def gradient(self, layer: Layer, inputs: list, out_residuals: list) -> dict:
        return kernel(kernels, layer, "gradient")(self.workspace, layer, inputs, out_residuals)

    def update(self, layer: Layer, weights: dict, grads: dict, batch: int) -> None:
        kernels.update(self.workspace, layer, weights, grads, batch)
