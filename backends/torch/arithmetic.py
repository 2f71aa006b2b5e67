"""The data types on PyTorch: what each keeps its arrays in, where its products are summed,
and which devices compute it (docs/backends.md, "The PyTorch backend").

Every type sums products in float32 and rounds each result once to its storage type, the
model of ``model.dtypes.PRECISIONS``. float16 and bfloat16 run their convolutions and
products in the type itself where the device has kernels for it (a GPU, a CPU whose oneDNN
computes it); elsewhere on float32 copies (exact: every float16 and bfloat16 value is a
float32 value), which give the same sums at float32 speed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from pytest_gostcnn.model.dtypes import master_dtype

STORAGE = {
    "float32": torch.float32,
    "tf32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}
# TF32 on NVIDIA tensor cores: compute capability 8.0 (Ampere) and later.
TF32_CAPABILITY = (8, 0)


def _cuda_name(device: torch.device) -> str:
    props = torch.cuda.get_device_properties(device)
    return f"{props.name}, compute capability {props.major}.{props.minor}"


def type_problem(dtype: str, device: torch.device) -> str | None:
    """Why ``device`` cannot compute ``dtype``, in one line naming both; None if it can."""
    if dtype not in STORAGE:
        return (
            f"{dtype} on {device}: the torch backend computes {', '.join(STORAGE)} in "
            "floating point"
        )
    if dtype != "tf32":
        return None
    if device.type != "cuda" or torch.version.hip is not None:
        return (
            f"tf32 on {device}: PyTorch computes TF32 only on NVIDIA CUDA devices of compute "
            "capability 8.0 or later; choose float32, float16 or bfloat16 here"
        )
    if torch.cuda.get_device_capability(device) < TF32_CAPABILITY:
        return (
            f"tf32 on {device} ({_cuda_name(device)}): TF32 needs compute capability 8.0 "
            "or later; choose float32, float16 or bfloat16 here"
        )
    return None


def _onednn_computes(dtype: str) -> bool:
    """Whether PyTorch's oneDNN runs ``dtype``'s convolutions on this CPU's own units."""
    probe = {"float16": "_is_mkldnn_fp16_supported", "bfloat16": "_is_mkldnn_bf16_supported"}
    try:
        return bool(getattr(torch.ops.mkldnn, probe[dtype])())
    except (AttributeError, RuntimeError):  # an older or a non-oneDNN build
        return False


def native_products(dtype: str, device: torch.device) -> bool:
    """Whether float16 / bfloat16 convolutions and products run in the type itself on
    ``device`` (its own kernels), not on float32 copies."""
    if dtype not in ("float16", "bfloat16"):
        return False
    return device.type != "cpu" or _onednn_computes(dtype)


def round_tf32(a: torch.Tensor) -> torch.Tensor:
    """float32 ``a`` rounded to TF32's 10 mantissa bits, to nearest, ties to even.

    Tensor cores may truncate the low 13 bits instead: on factors rounded here first,
    whatever they do is exact. A NaN stays NaN.
    """
    bits = a.contiguous().view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    bits = (bits + (0xFFF + ((bits >> 13) & 1))) & 0xFFFFE000
    bits = torch.where(bits >= 1 << 31, bits - (1 << 32), bits)  # back into int32's range
    rounded = bits.to(torch.int32).view(torch.float32).reshape(a.shape)
    return torch.where(torch.isnan(a), a, rounded)


def host_array(host: np.ndarray, dtype: str) -> np.ndarray:
    """A float64 host array as the NumPy copy ``to_device`` sends: float16 rounded once from
    float64 (as verification rounds it), else float32 (bfloat16 is then rounded by PyTorch,
    to nearest even, as ``PRECISIONS["bfloat16"]`` rounds the same float32 values)."""
    return np.array(host, dtype=np.float16 if dtype == "float16" else np.float32)


@dataclass(frozen=True)
class Arithmetic:
    """How one data type computes on one device.

    ``storage``: the maps' and weights' type; ``master``: the type gradients and updated
    weights are kept in (float32 for float16, docs/standard.md §6); ``native``: products
    in ``storage`` on the device's own kernels, else on float32 copies.
    """

    dtype: str
    storage: torch.dtype
    master: torch.dtype
    native: bool

    @classmethod
    def of(cls, dtype: str, device: torch.device) -> Arithmetic:
        master = STORAGE[master_dtype(dtype)]
        return cls(dtype, STORAGE[dtype], master, native_products(dtype, device))

    def store(self, a: torch.Tensor) -> torch.Tensor:
        """A result in the storage type, rounded once (to nearest even)."""
        return a.to(self.storage)

    def factor(self, a: torch.Tensor) -> torch.Tensor:
        """An operand of a convolution or product: in the storage type (``native``), else
        as float32, rounded to TF32 first in tf32."""
        if self.native:
            return a
        a = a.float()
        return round_tf32(a) if self.dtype == "tf32" else a

    def bias(self, a: torch.Tensor) -> torch.Tensor:
        """A bias as the product's own type sums it in: the storage type or float32."""
        return a if self.native else a.float()

    def working(self, weights: dict) -> dict:
        """The weights as forward and backward read them: float32 masters rounded to the
        storage type (float16 training), else the weights themselves."""
        if self.master == self.storage:
            return weights
        return {name: w.to(self.storage) for name, w in weights.items()}

    def facts(self, device: torch.device) -> dict:
        """What the type computes in on ``device``, for the report's backend facts."""
        name = str(self.storage).removeprefix("torch.")
        if self.dtype == "tf32":
            products = (
                "TF32 tensor cores, each factor first rounded to 10 mantissa bits "
                "(to nearest, ties to even)"
            )
        elif self.native:
            products = f"{name} operands in the device's own {name} kernels"
        elif self.storage != torch.float32:
            products = f"float32, on {name} operands converted exactly (no {name} unit used)"
        else:
            products = "float32 (no TF32)" if device.type == "cuda" else "float32"
        facts = {
            "storage": name,
            "products": products,
            "sums": "float32, each result rounded once to the storage type (to nearest even)",
        }
        if self.master != self.storage:
            facts["gradients_and_master_weights"] = str(self.master).removeprefix("torch.")
        return facts
