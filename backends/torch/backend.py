"""The PyTorch backend: the kernels of ``kernels.py`` on one PyTorch device, chosen by
``--gost-backend-option device=DEVICE`` (default: the cell's GPU when PyTorch sees one,
``cuda:<cell>``, else the CPU), in the data types of ``arithmetic.py``; here the device,
its synchronisation, its peak and the library versions for the report.

Without PyTorch the module still imports and ``TorchBackend.unavailable_reason()`` says
how to install it; the plugin then skips every item.
"""

from __future__ import annotations

import os
import re

import numpy as np

from pytest_gostcnn.backend import BackendError
from pytest_gostcnn.machine.facts import cpu_model
from pytest_gostcnn.machine.peak import Peak, gpu_peak

from ..common import KernelSetBackend, declared_options
from ..numpy.workspace import cell_cores

INSTALL_HINT = (
    "PyTorch is not installed: on a CPU, pip install torch --index-url "
    "https://download.pytorch.org/whl/cpu; for CUDA see docs/backends.md, The PyTorch backend"
)

# OpenMP threads that wait for work sleep instead of spinning (unless the environment says
# otherwise): spinning threads slow PyTorch down where other jobs share the cores
# (docs/backends.md, "The PyTorch backend"). OpenMP reads this when PyTorch loads it, so it
# must be set before the first ``import torch``.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

try:
    import torch
except ModuleNotFoundError:
    torch = None
    _import_problem = INSTALL_HINT
except Exception as exc:  # a broken installation: say so instead of failing to import
    torch = None
    _import_problem = f"PyTorch failed to import: {type(exc).__name__}: {exc}"
else:
    _import_problem = None
    from .arithmetic import Arithmetic, host_array, type_problem
    from .integer import INT8_FACTS, Int8Kernels, engine_problem
    from .kernels import TorchKernels


def onednn_version(config: str) -> str | None:
    """oneDNN's version in ``torch.__config__.show()`` ("Intel(R) MKL-DNN v3.12.0 (...)")."""
    found = re.search(r"(?:MKL-DNN|oneDNN) v(\d+(?:\.\d+)+)", config)
    return found.group(1) if found else None


def default_device(cell: int) -> str:
    """The cell's GPU (``cuda:<cell modulo the visible GPUs>``) when PyTorch sees one, else
    the CPU."""
    if torch.cuda.is_available():  # docs/cells.md: each cell its GPU, wrapped over them
        return f"cuda:{cell % torch.cuda.device_count()}"
    return "cpu"


def parse_device(text: str):
    """``text`` as a ``torch.device`` PyTorch can compute on here; BackendError naming the
    option and why not."""
    where = f"--gost-backend-option device={text}"
    try:
        device = torch.device(text)
    except (RuntimeError, ValueError) as exc:
        raise BackendError(f"{where}: not a PyTorch device ({exc})") from None
    if device.type == "cpu":
        return device
    module = getattr(torch, device.type, None)
    is_available = getattr(module, "is_available", None)
    if is_available is None or not is_available():
        raise BackendError(f"{where}: PyTorch has no {device.type} device on this machine")
    count = module.device_count()
    if device.index is not None and device.index >= count:
        raise BackendError(
            f"{where}: PyTorch sees {count} {device.type} device(s), numbered from 0"
        )
    return device


class TorchBackend(KernelSetBackend):
    """The standard's layers on PyTorch's operators, on one device, in the floating-point
    types the device computes (tf32 on NVIDIA GPUs of compute capability 8.0 or later) and
    in int8 on the CPU (QNNPACK)."""

    name = "torch"
    version = getattr(torch, "__version__", "")
    inference_dtypes = ("float32", "float16", "bfloat16", "tf32", "int8")
    training_dtypes = ("float32", "float16")
    backend_options = {
        "device": "the PyTorch device, e.g. cpu, cuda:1 (default: the cell's GPU cuda:<cell> "
        "when there is one, else cpu)",
    }

    @classmethod
    def unavailable_reason(cls) -> str | None:
        return _import_problem

    def __init__(
        self, dtype: str = "float32", cell: int = 0, options: dict[str, str] | None = None
    ) -> None:
        super().__init__(dtype, cell)
        options = declared_options(self, options)
        self.torch_device = parse_device(options.get("device") or default_device(cell))
        integer = dtype.startswith("int")
        problem = (engine_problem if integer else type_problem)(dtype, self.torch_device)
        if problem is not None:
            raise BackendError(problem)
        if self.torch_device.type == "cpu":
            # The cell's cores (its affinity set), as the NumPy backend's BLAS uses them.
            torch.set_num_threads(cell_cores())
        elif self.torch_device.type == "cuda":
            # TF32 only in tf32 (float32 means float32), and half-type GEMMs sum in float32
            # (cuBLAS may otherwise reduce split sums in the half type).
            torch.backends.cudnn.allow_tf32 = dtype == "tf32"
            torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
            torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
            torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
        self.integer = Int8Kernels() if integer else None
        self.arithmetic = Arithmetic.of("float32" if integer else dtype, self.torch_device)
        self.kernels = TorchKernels(self.arithmetic)

    # The device. ------------------------------------------------------------------------

    def _is_cuda(self) -> bool:
        return self.torch_device.type == "cuda"

    def _cuda_index(self) -> int:
        index = self.torch_device.index
        return torch.cuda.current_device() if index is None else index

    def device(self) -> str:
        if self._is_cuda():
            props = torch.cuda.get_device_properties(self._cuda_index())
            return f"GPU {self._cuda_index()}: {props.name} ({props.multi_processor_count} SMs)"
        if self.torch_device.type == "cpu":
            return f"CPU: {cpu_model()} ({torch.get_num_threads()} cores)"
        return f"PyTorch device {self.torch_device}"

    def peak(self) -> Peak | None:
        """The CPU's estimate in the data type, an NVIDIA GPU's from its properties; None
        (give --gost-peak) for any other device, ROCm's included (its "cuda" devices
        report an architecture, not an NVIDIA compute capability)."""
        if self.torch_device.type == "cpu":
            return super().peak()
        if not self._is_cuda() or torch.version.hip is not None:
            return None
        props = torch.cuda.get_device_properties(self._cuda_index())
        clock_khz = getattr(props, "clock_rate", None)  # kHz, where PyTorch reports it
        return gpu_peak(
            self.dtype,
            props.name,
            props.multi_processor_count,
            clock_khz * 1e3 if clock_khz else None,
            capability=(props.major, props.minor),
        )

    def system(self) -> dict:
        facts = {
            "torch": torch.__version__,
            "torch_device": str(self.torch_device),
            "arithmetic": INT8_FACTS
            if self.integer is not None
            else self.arithmetic.facts(self.torch_device),
        }
        if self.torch_device.type == "cpu":
            facts["torch_threads"] = torch.get_num_threads()
            facts["omp_wait_policy"] = os.environ.get("OMP_WAIT_POLICY")
            facts["onednn"] = (
                onednn_version(torch.__config__.show())
                if torch.backends.mkldnn.is_available()
                else None
            )
        elif self._is_cuda():
            props = torch.cuda.get_device_properties(self._cuda_index())
            cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
            facts.update(
                gpu=props.name,
                gpu_index=self._cuda_index(),
                sm_count=props.multi_processor_count,
                compute_capability=f"{props.major}.{props.minor}",
                cuda_runtime=torch.version.cuda,
                cudnn=str(cudnn) if cudnn is not None else None,
            )
        return facts

    def synchronize(self) -> None:
        if self.torch_device.type == "cpu":
            return  # PyTorch's CPU operators return when their work is done
        getattr(torch, self.torch_device.type).synchronize(self.torch_device)

    # The kernels: int8's forward in QNNPACK, every other step the kernel set's. -----------

    def forward(self, layer, inputs: list, weights: dict) -> list:
        if self.integer is not None:
            return self.integer.forward(layer, inputs, weights, self.scales[layer.number])
        return super().forward(layer, inputs, weights)

    # Data. --------------------------------------------------------------------------------

    def to_device(self, host: np.ndarray):
        if self.integer is not None:  # int8 maps and weights, int32 biases, as given
            if not np.issubdtype(np.asarray(host).dtype, np.integer):
                raise TypeError(f"to_device in int8: expected integers, got {host.dtype}")
            return torch.from_numpy(np.array(host)).to(self.torch_device)
        # A copy: a tensor on the CPU shares its memory with the array it comes from.
        tensor = torch.from_numpy(host_array(host, self.dtype))
        return tensor.to(self.torch_device, self.arithmetic.storage)

    def to_host(self, array) -> np.ndarray:
        array = array.detach().cpu()
        # NumPy has no bfloat16: its values as float32, which verification accepts.
        return (array.float() if array.dtype == torch.bfloat16 else array).numpy()
