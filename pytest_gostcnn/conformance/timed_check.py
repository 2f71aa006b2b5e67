"""The checks of section 9's timed rounds (standard.md §7.7): section 8's rule applied to
the data a round ran on, as it delivered it: one image of an inference round, or a training
unit replayed from the weights it started from.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from array_api_compat import array_namespace, size

from pytest_gostcnn.backend import Backend
from pytest_gostcnn.model import executor
from pytest_gostcnn.model.dtypes import PRECISIONS, master_dtype
from pytest_gostcnn.model.fixed_point import ScaleTable, integer_type
from pytest_gostcnn.model.memory import results_held
from pytest_gostcnn.model.network import Network
from pytest_gostcnn.reference.library import NUMPY, Array, ReferenceLibrary, to_numpy

from . import fixed_point
from .error_model import ValueAndVariance
from .harness import SuiteError, comparer, guarded, model_of, suite_side
from .replay import Replay
from .sliced import VALUES, reference_training
from .verdicts import UPDATE_ERROR, ArrayCheck, Verification

# An updated weight array may err by at most this share of its update (standard.md §6,
# "Checked training units"): the error model's bound on a deep layer's gradient can exceed
# the update itself (its residual crosses many ReLUs and poolings near their ties), so
# СКОП alone would pass an update left out. Judged only where the update is at least
# UPDATE_FLOOR times the rounding of the weights it is added to: a smaller one the stored
# weights keep too little of for a share of it to mean anything.
UPDATE_SHARE = 0.5
UPDATE_FLOOR = 16.0
# A unit that starts from the suite's copy (not the drawn weights) holds that copy against
# the drawn weights too: it may lie from them at most START_SHARE times the earlier rounds
# of its segment times the larger of this unit's update and the floor above, so a backend
# cannot move its weights, in a unit nobody checked, into a state cheaper to go on from
# (a channel zeroed stays zero) that later units, replayed from it, would take as given.
START_SHARE = 100.0


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
    weights: executor.Weights,
    image: np.ndarray,
    output: Any,
    threshold: float | None = None,
    scales: ScaleTable | None = None,
    library: ReferenceLibrary = NUMPY,
) -> Verification:
    """Check an inference round (standard.md §7.7) by section 8's rule: ``image``, the host
    images it judges (one image of the round, drawn after it delivered), against ``output``,
    the rows of the output map the round delivered for them (host copies made inside its
    timed region, never read from the backend again).

    ``weights`` are the host weights the backend was given (rounded here as ``to_device``
    rounded them, unless ``bound_weights`` already did); an integer type's are integers with
    its calibrated ``scales``.
    ``library``: the array library the float64 reference runs on (an integer type's runs
    on NumPy). Each image's СКОП is its own: the error model of that image alone.
    """
    if integer_type(backend.dtype) is not None:
        return _verify_integer_round(backend, network, weights, image, output, scales, threshold)
    model, representable = model_of(backend.dtype, library)

    def prepare() -> tuple:
        ref_weights = bound_weights(weights, backend.dtype, library)
        ref_image = model.bound(representable(np.asarray(image, dtype=np.float64)))
        return executor.infer(network, model, ref_weights, ref_image), ref_weights

    def verify(verification: Verification) -> None:
        reference, ref_weights = suite_side(image.shape[0], prepare)
        master = [w for ws in ref_weights.values() for w in ws.values()]
        _check_range([reference], master, backend.dtype)
        comparer(verification, backend, threshold, on_host=True)("output", output, reference)

    return guarded(f"{network.latin}-inference round", verify)


def bound_weights(weights: executor.Weights, dtype: str, library: ReferenceLibrary = NUMPY):
    """The host ``weights`` as the reference of ``dtype`` reads them (rounded to the type, with
    their rounding's error); weights already bound are kept as they are, so a test's checks
    bind them once (``performance/round_checks.py``)."""
    model, representable = model_of(dtype, library)
    return {
        n: {
            k: a
            if isinstance(a, ValueAndVariance)
            else model.bound(representable(np.asarray(a, np.float64)))
            for k, a in ws.items()
        }
        for n, ws in weights.items()
    }


@dataclass(frozen=True)
class DeliveredRound:
    """One training round of a unit as its check sees it: the output map it delivered, and
    ``data()``, the host images and output residual it was given (rebuilt when asked, so a
    unit's data is never held at once)."""

    number: int  # the timed round, from 1
    output: Any
    data: Callable[[], tuple[np.ndarray, np.ndarray]]


def verify_unit(
    backend: Backend,
    network: Network,
    start: executor.Weights,
    rounds: Sequence[DeliveredRound],
    updated: executor.Weights,
    input_residuals: Sequence[Any],
    threshold: float | None = None,
    library: ReferenceLibrary = NUMPY,
    kept: bool = False,
    drawn: executor.Weights | None = None,
    prior: int = 0,
) -> Verification:
    """Check a training unit (standard.md §7.7): its rounds replayed from the weights it
    started from (``replay.Replay``: the float64 reference with its error model, the weights
    stored after each update in the type they are kept in), every round's delivered output
    output and input residual compared with its replay (``input_residuals``, the suite's
    copies, in the rounds' order), and every ``updated`` weight array the suite kept at the
    unit's end, against its СКОП and against its update (``update_check``).

    ``start``: the drawn host weights (a segment's first unit), or with ``kept`` the suite's
    copy of the backend's weights when the unit before ended, ``prior`` rounds after the
    segment's ``drawn`` weights (``start_check``). Nothing is read from the
    backend: every array is a copy made inside the timed rounds, so no read after the draw
    tells the backend that its unit was checked.
    """
    if not rounds or len(input_residuals) != len(rounds):
        raise ValueError("a unit's check needs its rounds, each with its input residual")
    batch = int(np.shape(rounds[0].output)[0])

    def verify(verification: Verification) -> None:
        # The suite's copies to the host here, where what fails of the backend's is its own.
        first = _on_host(start) if kept else start
        done, residuals = _on_host(updated), [_on_host(r) for r in input_residuals]
        replay = suite_side(batch, lambda: Replay(network, backend.dtype, first, library, kept))
        before = {n: {k: v.copy() for k, v in ws.items()} for n, ws in replay.values.items()}
        model = replay.model
        held = results_held(network, batch, training=True)
        compare = comparer(verification, backend, threshold, on_host=True)
        for delivered, residual in zip(rounds, residuals, strict=True):
            weights = replay.weights()

            def prepare(delivered: DeliveredRound = delivered, weights: dict = weights):
                image, residual = delivered.data()  # a slice of the batch at a time
                return reference_training(
                    network, model, weights, image, residual, held, keep=VALUES
                )

            reference = suite_side(batch, prepare)
            master = [w for ws in weights.values() for w in ws.values()]
            master += [g for gs in reference.gradients.values() for g in gs.values()]
            _check_range([reference.output, reference.input_residual], master, backend.dtype)
            number = delivered.number
            compare(f"round {number} output", delivered.output, reference.output)
            compare(f"round {number} input residual", residual, reference.input_residual)
            replay.keep(weights)
        for layer in network.weight_layers:
            for key in layer.weight_shapes:
                name = f"row {layer.number} {key}"
                got = done[layer.number][key]
                compare(f"{name} updated", got, weights[layer.number][key], master=True)
                after = replay.values[layer.number][key]
                first = before[layer.number][key]
                checks = [update_check(name, got, first, after, backend.dtype)]
                if kept and drawn is not None:
                    origin = replay.precision.round(np.asarray(drawn[layer.number][key], float))
                    checks.append(start_check(name, first, origin, after, backend.dtype, prior))
                if threshold is None:  # an override sets every bound
                    verification.checks += [check for check in checks if check is not None]

    return guarded(f"{network.latin}-training unit", verify)


def update_check(
    name: str, got: Any, before: np.ndarray, after: np.ndarray, dtype: str
) -> ArrayCheck | None:
    """``got``, a weight array as the backend kept it after a unit, against ``after``, the
    reference's (both in the type weights are kept in), with at most ``UPDATE_SHARE`` of the
    reference's update from ``before`` as its bound; None where that update is below
    ``UPDATE_FLOOR`` times the weights' rounding, or ``got`` is no array of their shape (the
    СКОП check names that)."""
    if not isinstance(got, np.ndarray) or got.shape != after.shape:
        return None
    step = _rms(after - before)
    rounding = PRECISIONS[master_dtype(dtype)].storage * _rms(before)
    if step == 0 or step < UPDATE_FLOOR * rounding:
        return None
    error = _rms(got.astype(np.float64) - after)
    return ArrayCheck(
        f"{name} update",
        error,
        UPDATE_SHARE * step,
        statistic=UPDATE_ERROR,
        note=f"the update may err by at most {UPDATE_SHARE:g} of itself; one left out errs by 1",
    )


def start_check(
    name: str, start: np.ndarray, drawn: np.ndarray, after: np.ndarray, dtype: str, prior: int
) -> ArrayCheck:
    """The weights a unit started from (the backend's, ``prior`` rounds into the segment)
    against the segment's ``drawn`` ones: at most ``START_SHARE`` x ``prior`` x the larger of
    this unit's update to ``after`` and ``UPDATE_FLOOR`` times the weights' rounding."""
    step = max(
        _rms(after - start), UPDATE_FLOOR * PRECISIONS[master_dtype(dtype)].storage * _rms(start)
    )
    return ArrayCheck(
        f"{name} start",
        _rms(start - drawn),
        START_SHARE * max(prior, 1) * step,
        statistic=UPDATE_ERROR,
        note="the weights a unit starts from may lie from the drawn ones by the rounds' updates",
    )


def _on_host(kept: Any) -> Any:
    """A copy the suite kept (an array, or weights by row and name) on the host: through its
    namespace, never the backend; as it is where it has none (a host copy already)."""
    if isinstance(kept, dict):
        return {n: {k: _on_host(a) for k, a in ws.items()} for n, ws in kept.items()}
    try:
        array_namespace(kept)
    except TypeError:
        return kept
    detach = getattr(kept, "detach", None)  # a tensor that records its gradient
    return to_numpy(detach() if callable(detach) else kept)


def _rms(array: np.ndarray) -> float:
    return math.sqrt(float(np.mean(np.square(array)))) if array.size else 0.0


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
        raise ValueError(f"a {backend.dtype} round's check needs its calibrated scales")

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
