"""The data types the standard admits (standard.md §8) and how each rounds a value.

``PRECISIONS`` gives, for each floating-point type, its unit roundoffs and its rounding to
nearest; the error model behind СКОП and the backends' storage use the same roundings.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

# Section 11: the data types admitted for inference, and for training.
INFERENCE_DTYPES = ("float32", "float16", "bfloat16", "tf32", "int8", "int16")
TRAINING_DTYPES = ("float32", "float16")
# standard.md §6, ruling on float16 training: where the data type cannot hold section 8's
# values (weight gradients summed over a batch and a map pass float16's 65504), gradients
# and the master copy of the weights are kept in this type, as mixed-precision training
# keeps them; forward and backward read the weights rounded to the data type.
MASTER_DTYPES = {"float16": "float32"}


def master_dtype(dtype: str) -> str:
    """The type a training implementation keeps gradients and weights in, for ``dtype``."""
    return MASTER_DTYPES.get(dtype, dtype)


def _to_float32(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, dtype=np.float32).astype(np.float64)


def _to_float16(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, dtype=np.float16).astype(np.float64)


def _dropping(dropped: int) -> Callable[[np.ndarray], np.ndarray]:
    """Rounding to float32 values whose low ``dropped`` mantissa bits are 0, to nearest,
    ties to even: 16 for bfloat16 (the top 16 bits of float32), 13 for TF32."""
    half, keep = (1 << (dropped - 1)) - 1, (0xFFFFFFFF >> dropped) << dropped

    def round_to(a: np.ndarray) -> np.ndarray:
        bits = np.asarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
        bits = (bits + half + ((bits >> dropped) & 1)) & keep
        return bits.astype(np.uint32).view(np.float32).astype(np.float64)

    return round_to


_to_bfloat16 = _dropping(16)
_to_tf32 = _dropping(13)


@dataclass(frozen=True)
class Precision:
    """Rounding of one data type: stored values, extra rounding of factors, accumulator.

    ``round`` maps float64 values to the nearest values of the type (as float64).
    """

    storage: float
    multiply: float
    accumulate: float
    round: Callable[[np.ndarray], np.ndarray]
    underflow: float = 2**-150  # half the smallest subnormal: the error bound near zero
    largest: float = float(np.finfo(np.float32).max)  # the largest finite value


# Unit roundoffs (half an ulp of 1): float32 2^-24, float16 2^-11, bfloat16 2^-8. TF32 keeps
# float32 storage and accumulation but rounds each factor of a product to 10 mantissa bits.
# float16 and bfloat16 accumulate in float32, as every GEMM library does. TF32's drawn
# values are TF32 values (10 mantissa bits): a weight's factor rounding would otherwise be
# one error shared by every position of a map, which a global average does not shrink.
# Near zero a stored value's error is at most half the smallest subnormal, whatever its
# size (float16's is 2^-24, the others' that of float32's range): section 9's benchmark data
# put float16's training residuals there (docs/benchmarking.md).
PRECISIONS: dict[str, Precision] = {
    "float32": Precision(2**-24, 0.0, 2**-24, _to_float32),
    "tf32": Precision(2**-24, 2**-11, 2**-24, _to_tf32),
    "float16": Precision(2**-11, 0.0, 2**-24, _to_float16, underflow=2**-25, largest=65504.0),
    "bfloat16": Precision(2**-8, 0.0, 2**-24, _to_bfloat16, underflow=2**-134),
}


# The host dtype a backend's arrays must come back in, where NumPy has the type.
HOST_DTYPES = {
    "float32": np.float32,
    "tf32": np.float32,
    "float16": np.float16,
    "int8": np.int8,
    "int16": np.int16,
}


def host_array_problem(got: object, shape: tuple[int, ...], dtype: str) -> str | None:
    """Why ``got``, an array a backend handed to the host, is not a NumPy array of ``shape``
    in ``dtype``'s host type, or None."""
    if isinstance(got, Exception):
        return f"to_host raised {type(got).__name__}: {got}"
    if not isinstance(got, np.ndarray):
        return f"to_host returned {type(got).__name__}, not a NumPy array"
    if got.shape != shape:
        return f"shape {got.shape}, expected {shape}"
    expected = HOST_DTYPES.get(dtype)
    if expected is not None and got.dtype != expected:
        return f"dtype {got.dtype}, expected {np.dtype(expected)} for {dtype}"
    if expected is None and not np.issubdtype(got.dtype, np.floating):
        return f"dtype {got.dtype}, expected a floating-point host array"
    return None
