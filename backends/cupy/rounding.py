"""bfloat16 and TF32 in any array module ``xp``: float32 values with their low mantissa
bits rounded off (to nearest, ties to even), and a host array in a data type's storage type.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pytest_gostcnn.model.dtypes import PRECISIONS


def _rounded_bits(xp: Any, a, dropped: int) -> Any:
    """``a`` as float32 bit patterns (uint32) rounded to nearest, ties to even, so that the
    low ``dropped`` bits are 0: 16 for bfloat16, 13 for TF32.

    ``xp``'s integer arithmetic wraps, never raises. A NaN stays a (quiet) NaN: clearing its
    low bits could turn it into an infinity.
    """
    bits = xp.ascontiguousarray(a, dtype=xp.float32).view(xp.uint32)
    half, keep = (1 << (dropped - 1)) - 1, (0xFFFFFFFF >> dropped) << dropped
    rounded = (bits + (half + ((bits >> dropped) & 1))) & keep
    nan = (bits & 0x7FFFFFFF) > 0x7F800000
    return xp.where(nan, (bits | 0x00400000) & keep, rounded)


def bfloat16_bits(xp: Any, a) -> Any:
    """``a`` rounded to bfloat16 as float32 bit patterns: the rounding of
    ``model.dtypes.PRECISIONS["bfloat16"].round``, in ``xp``."""
    return _rounded_bits(xp, a, 16)


def round_tf32(xp: Any, a) -> Any:
    """``a`` rounded to TF32's 10 mantissa bits (to nearest, ties to even), as float32.

    The tf32 GEMM operands are rounded here, so the product does not depend on whether a
    device's tensor cores round or truncate the low 13 bits (truncation doubles the
    error per factor, beyond what the error model of ``conformance/error_model.py`` admits).
    """
    return _rounded_bits(xp, a, 13).view(xp.float32)


def round_bfloat16(xp: Any, a) -> Any:
    """``a`` rounded to the nearest bfloat16 values, held in a float32 array."""
    return bfloat16_bits(xp, a).view(xp.float32)


def host_to_storage(host: np.ndarray, dtype: str) -> np.ndarray:
    """A float64 host array in the storage type of ``dtype`` (NumPy), rounded once."""
    if dtype == "float16":
        return np.asarray(host, dtype=np.float16)
    if dtype == "bfloat16":
        # The verification's own rounding; every bfloat16 value is a float32 value.
        return PRECISIONS["bfloat16"].round(np.asarray(host, dtype=np.float64)).astype(np.float32)
    return np.asarray(host, dtype=np.float32)
