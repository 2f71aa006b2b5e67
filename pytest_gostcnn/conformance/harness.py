"""What every verification of section 8 shares: the comparison of one returned array with
the reference, the error model of the data type, and the guard that turns a backend's
exception into its verdict (standard.md §6).
"""

from __future__ import annotations

import math
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np

from pytest_gostcnn.backend import Backend
from pytest_gostcnn.model.dtypes import PRECISIONS, host_array_problem, master_dtype
from pytest_gostcnn.model.executor import KernelError
from pytest_gostcnn.model.fixed_point import integer_type
from pytest_gostcnn.reference.library import NUMPY, ReferenceLibrary, to_numpy

from .error_kernels import ErrorModelKernels
from .error_model import ValueAndVariance, admissible_rmse
from .verdicts import MEAN_ERROR, ArrayCheck, Verification

# An array with fewer non-zero elements than this share says little about correctness.
MIN_NONZERO_SHARE = 0.01
# How many of its own standard deviations an integer layer item's mean error may reach
# (``mean_error_check``): about 6e-7 of correct items exceed it by chance.
MEAN_ERROR_SIGMAS = 5.0


def rmse(got: np.ndarray, reference: np.ndarray) -> float:
    """СКО: sqrt(mean((verified - reference)^2)), computed in float64 a block at a time."""
    return _Sums(got, reference).rmse()


def untrustworthy(reference: np.ndarray) -> str | None:
    """Why a reference array is too degenerate for its СКО to mean much, or None."""
    return _Sums(None, reference).degenerate()


def check_array(
    name: str,
    got: np.ndarray,
    reference: ValueAndVariance,
    dtype: str,
    threshold: float | None = None,
    host_dtype: str | None = None,
    scale: float | None = None,
) -> ArrayCheck:
    """Compare one array a backend returned (on the host) with the reference.

    ``threshold`` overrides СКОП as a share of the reference array's RMS; ``host_dtype`` is
    the type the array is kept in when it is not ``dtype`` (a float16 gradient, kept in
    float32: ``model.dtypes.MASTER_DTYPES``). An integer type's array holds integers at
    ``scale`` (docs/backends.md, "Integer types"): it is compared as ``got * scale``. The
    comparison runs on the host in NumPy, whichever library computed the reference, a
    block at a time (``_Sums``).
    """
    if dtype not in PRECISIONS and integer_type(dtype) is None:
        raise ValueError(_NO_MODEL.format(dtype=dtype))
    problem = host_array_problem(got, tuple(reference.shape), host_dtype or dtype)
    sums = _Sums(got if problem is None else None, reference.value, scale)
    if threshold is None:
        admissible = admissible_rmse(reference)
    else:
        admissible = threshold * math.sqrt(sums.reference_squares / sums.size)
    if problem is None and sums.not_finite:
        problem = f"{sums.not_finite} of {got.size} elements are NaN or Inf"
    if problem is not None:
        return ArrayCheck(name, None, admissible, problem)
    problem = sums.degenerate()
    if problem is not None:
        return ArrayCheck(name, None, admissible, problem, reference_problem=True)
    return ArrayCheck(name, sums.rmse(), admissible)


# The elements a comparison reads at a time: its float64 temporaries take a few MB at any
# batch, where the whole array's took three times the array (docs/performance.md, "The
# suite's memory").
COMPARED_BLOCK = 2**18


class _Sums:
    """The sums a comparison of ``got`` (None: not compared) with the ``reference`` array
    needs, in float64, each added a block of ``COMPARED_BLOCK`` elements at a time in
    order: the sums change at float64 rounding from the whole array's."""

    def __init__(self, got: np.ndarray | None, reference, scale: float | None = None) -> None:
        self.size = math.prod(reference.shape)
        self.differences = self.reference_squares = 0.0
        self.nonzero = self.not_finite = 0
        self.first, self.constant = None, True
        flat = reference.reshape(-1)
        host = None if got is None else np.reshape(got, -1)
        for start in range(0, self.size, COMPARED_BLOCK):
            block = slice(start, start + COMPARED_BLOCK)
            value = np.asarray(to_numpy(flat[block]), dtype=np.float64)
            self._take_reference(value)
            if host is not None:
                self._take_got(np.array(host[block], dtype=np.float64), value, scale)

    def _take_reference(self, value: np.ndarray) -> None:
        if self.first is None:
            self.first = value[0]
        self.constant = self.constant and bool(np.all(value == self.first))
        self.nonzero += int(np.count_nonzero(value))
        self.reference_squares += float(np.dot(value, value))

    def _take_got(self, got: np.ndarray, value: np.ndarray, scale: float | None) -> None:
        """``got``: a float64 copy of the block, made free to overwrite."""
        self.not_finite += got.size - int(np.count_nonzero(np.isfinite(got)))
        if scale is not None:
            got *= scale
        got -= value
        self.differences += float(np.dot(got, got))

    def rmse(self) -> float:
        return math.sqrt(self.differences / self.size)

    def degenerate(self) -> str | None:
        """Why the reference is too degenerate for its СКО to mean much, or None."""
        if self.size > 1 and self.constant:
            return f"the reference array is constant ({self.first:.3g}); untrustworthy"
        share = self.nonzero / self.size
        if share < MIN_NONZERO_SHARE:
            return f"the reference array is {100 * (1 - share):.1f}% zeros; untrustworthy"
        return None


def mean_error_check(
    name: str, got: np.ndarray, reference: ValueAndVariance, scale: float
) -> ArrayCheck | None:
    """The mean error of an integer layer item's array against its bound, or None where
    no value of it rounds (СКОП 0 demands it exact already).

    The item's inputs are exact on their grids, so each output's error is its own
    requantisation's: independent, at most s/2, and 0 on average when it rounds to nearest
    as the model says. Their mean then has the standard deviation sqrt(sum of var) / N, and
    may reach ``MEAN_ERROR_SIGMAS`` of it. A rounding that leans one way (floor: -s/2 at
    every value) exceeds it by sqrt(3N) / MEAN_ERROR_SIGMAS, which СКО cannot show: floor's
    RMS error is only twice the model's (standard.md §6, "Integer inference").
    """
    total = float(np.sum(to_numpy(reference.var)))
    if total == 0:
        return None
    value = to_numpy(reference.value)
    difference = got.astype(np.float64) * scale - value
    mean = float(np.mean(difference))
    admissible = MEAN_ERROR_SIGMAS * math.sqrt(total) / value.size
    note = None
    if abs(mean) >= admissible:
        side = "below" if mean < 0 else "above"
        note = f"the values lie {side} the reference on average: the model rounds to nearest"
    return ArrayCheck(f"{name} mean", abs(mean), admissible, statistic=MEAN_ERROR, note=note)


_NO_MODEL = (
    "no error model derives СКОП for {dtype}: the floating-point error model covers the types "
    "of model.dtypes.PRECISIONS, and the fixed-point model (conformance.fixed_point) the "
    "integer types' inference (standard.md §6)"
)


def model_of(
    dtype: str, library: ReferenceLibrary = NUMPY
) -> tuple[ErrorModelKernels, Callable[[np.ndarray], np.ndarray]]:
    """The reference with the error model of ``dtype`` on ``library``, and the rounding of
    drawn values (on the host).

    standard.md §6 gives both implementations the same values: the draws are rounded to the data
    type first, so the implementation receives them exactly and the reference computes
    on the very same numbers. Integer types have the fixed-point model instead
    (``conformance.fixed_point``): ValueError.
    """
    precision = PRECISIONS.get(dtype)
    if precision is None:
        raise ValueError(_NO_MODEL.format(dtype=dtype))
    return ErrorModelKernels(precision, PRECISIONS[master_dtype(dtype)], library), precision.round


def comparer(
    result: Verification, backend: Backend, threshold: float | None, on_host: bool = False
) -> Callable[..., None]:
    """A function that checks one array the backend returned and records the check
    (``on_host``: the arrays are the host copies a timed round delivered, not read again);
    ``master=True`` for a gradient or an updated weight (kept in ``master_dtype``);
    ``scale``: an integer type's array, integers at that scale; ``mean``: its mean error
    is checked too (``mean_error_check``: a layer item's, whose errors are independent)."""

    def compare(
        name: str,
        got: object,
        reference: ValueAndVariance,
        master: bool = False,
        scale: float | None = None,
        mean: bool = False,
    ) -> None:
        host_dtype = master_dtype(backend.dtype) if master else None
        host = got if on_host else backend.to_host(got)
        check = check_array(name, host, reference, backend.dtype, threshold, host_dtype, scale)
        result.checks.append(check)
        if mean and scale is not None and check.problem is None:
            systematic = mean_error_check(name, host, reference, scale)
            if systematic is not None:
                result.checks.append(systematic)

    return compare


class SuiteError(Exception):
    """The suite's own side of a verification failed: drawing the data or computing the
    float64 reference (a MemoryError at a large batch, say), not the backend."""


class ContractError(Exception):
    """A kernel wrote into an array it was given to read (the backend contract forbids it)."""


def suite_side(batch: int, prepare: Callable[[], Any]) -> Any:
    """``prepare()``, with any exception it raises turned into a ``SuiteError``."""
    try:
        return prepare()
    except Exception as exc:
        raise SuiteError(
            f"the suite failed drawing the data or computing the float64 reference at batch "
            f"{batch}, before the backend ran: {type(exc).__name__}: {exc}"
        ) from exc


def guarded(subject: str, verify: Callable[[Verification], None]) -> Verification:
    """A verification: ``verify`` fills it; a backend that raises fails it with the exception
    as reason."""
    result = Verification(subject)
    try:
        verify(result)
    except SuiteError as exc:
        result.error, result.suite_failed = str(exc), True
    except ContractError as exc:
        result.error = str(exc)
    except KernelError as exc:  # what a kernel returned, named with the kernel
        result.error = f"the backend returned what the contract does not allow: {exc}"
    except Exception as exc:  # the backend's failure is the verdict, not a crash
        where = traceback.extract_tb(exc.__traceback__)[-1]
        result.error = (
            f"the backend raised {type(exc).__name__}: {exc} (at {where.filename}:{where.lineno})"
        )
    return result
