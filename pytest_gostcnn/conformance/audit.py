"""The audit of a timed round of section 9 (standard.md §7.7): section 8's rule applied to
the data that round ran on, from the weights it started from.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from array_api_compat import array_namespace, size

from pytest_gostcnn.backend import Backend
from pytest_gostcnn.model import executor
from pytest_gostcnn.model.dtypes import PRECISIONS, master_dtype
from pytest_gostcnn.model.fixed_point import ScaleTable, integer_type
from pytest_gostcnn.model.network import Network
from pytest_gostcnn.reference.library import NUMPY, Array, ReferenceLibrary

from . import fixed_point
from .error_model import ValueAndVariance
from .harness import SuiteError, comparer, guarded, model_of, suite_side
from .network import compare_training
from .verdicts import Verification


def _check_range(maps: list[ValueAndVariance], master: list[ValueAndVariance], dtype: str) -> None:
    """A SuiteError when a round's float64 reference is not finite or outgrows the data
    type (``maps``) or the type gradients and weights are kept in (``master``): training
    carries the benchmark's weights from round to round, and where they have grown past
    what the type holds, a backend that overflows is not at fault."""
    for arrays, kept in ((maps, dtype), (master, master_dtype(dtype))):
        limit = PRECISIONS[kept].largest if kept in PRECISIONS else math.inf
        peaks = [_largest(a.value) for a in arrays if size(a.value)]
        largest = max(peaks, default=0.0) if all(map(math.isfinite, peaks)) else math.inf
        if largest > limit:
            raise SuiteError(
                f"the float64 reference of this round reaches {largest:.3g}, beyond {kept}'s "
                f"largest value {limit:.5g}: the weights the round started from have grown "
                "past what the type holds over the rounds before it; no verdict on the round"
            )


def _largest(array: Array) -> float:
    xp = array_namespace(array)
    return float(xp.max(xp.abs(array)))


def verify_round(
    backend: Backend,
    network: Network,
    mode: str,
    weights: executor.Weights,
    image: np.ndarray,
    out_residual: np.ndarray | None,
    result: Any,
    updated: executor.Weights | None,
    threshold: float | None = None,
    scales: ScaleTable | None = None,
    library: ReferenceLibrary = NUMPY,
    trained: Callable[[dict], None] | None = None,
) -> Verification:
    """Audit one timed round (standard.md §7.7) by section 8's rule on that round's data.

    Every array of the round's is on the host already: what it delivered inside its timed
    region, and what it did not deliver read right after its audit was decided
    (docs/benchmarking.md, "Audited rounds"); none is read from the backend again.
    ``weights`` are the host weights the round started from (inference: those the backend
    was given, rounded here as ``to_device`` rounded them; training: those a correct
    backend holds, replayed on the host from the segment's start and stored in the type it
    keeps them in, ``conformance/replay.py``), ``image`` and ``out_residual`` the host
    arrays it was given; ``result`` is the round's output map, or its TrainingResult, and
    ``updated`` its weights after a training round. The float64
    reference runs one iteration from the same values. An integer type's round (inference)
    has integer ``weights`` and its calibrated ``scales``. ``library``: the array library the
    float64 reference runs on (an integer type's runs on NumPy). ``trained``, a training
    round's: called with the reference's weights after its iteration (the replay goes on
    from them, ``SegmentReplay.after``).
    """
    subject = f"{network.latin}-{mode} round"
    itype = integer_type(backend.dtype)
    if itype is not None:
        return _verify_integer_round(backend, network, weights, image, result, scales, threshold)
    model, representable = model_of(backend.dtype, library)
    held = representable if mode == "inference" else (lambda array: array)

    def prepare() -> tuple:
        ref_weights = {  # replayed weights come with the error of the rounds before
            n: {
                k: a
                if isinstance(a, ValueAndVariance)
                else model.bound(held(np.asarray(a, np.float64)))
                for k, a in ws.items()
            }
            for n, ws in weights.items()
        }
        ref_image = model.bound(representable(np.asarray(image, dtype=np.float64)))
        if mode == "inference":
            return executor.infer(network, model, ref_weights, ref_image), ref_weights
        ref_residual = model.bound(representable(np.asarray(out_residual, dtype=np.float64)))
        reference = executor.train(network, model, ref_weights, ref_image, ref_residual)
        if trained is not None:
            trained(ref_weights)
        return reference, ref_weights

    def verify(verification: Verification) -> None:
        reference, ref_weights = suite_side(image.shape[0], prepare)
        master = [w for ws in ref_weights.values() for w in ws.values()]
        compare = comparer(verification, backend, threshold, on_host=True)
        if mode == "inference":
            _check_range([reference], master, backend.dtype)
            compare("output", result, reference)
        else:
            master += [g for gs in reference.gradients.values() for g in gs.values()]
            _check_range([reference.output, reference.input_residual], master, backend.dtype)
            compare_training(compare, network, result, updated, reference, ref_weights)

    return guarded(subject, verify)


def _verify_integer_round(
    backend: Backend,
    network: Network,
    weights: executor.Weights,
    image: np.ndarray,
    result: Any,
    scales: ScaleTable | None,
    threshold: float | None,
) -> Verification:
    """An integer type's timed round: the reference under the calibrated scales, on the
    round's image quantised as the backend was given it (``fixed_point.fixed_reference``)."""
    itype = integer_type(backend.dtype)
    if scales is None:
        raise ValueError(f"a {backend.dtype} round's audit needs its calibrated scales")

    def prepare():
        try:
            return fixed_point.fixed_reference(network, weights, image, scales, itype)[1]
        except fixed_point.OutOfRange as exc:
            raise SuiteError(str(exc)) from exc

    def verify(verification: Verification) -> None:
        reference = suite_side(image.shape[0], prepare)
        scale = scales[network.layers[-1].number].outputs[0]
        comparer(verification, backend, threshold, on_host=True)(
            "output", result, reference, scale=scale
        )

    return guarded(f"{network.latin}-inference round", verify)
