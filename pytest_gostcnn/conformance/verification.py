"""Section 8: verify a backend against the float64 reference, one layer step or one network,
and audit a timed round of section 9 by the same rule.

Both get the same draws; each compared array's СКО is held against its СКОП, and a backend
that raises or returns NaN, a wrong shape or dtype fails with that reason (standard.md §6).
"""

from __future__ import annotations

import math
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pytest_gostcnn.backend import Backend
from pytest_gostcnn.model import executor
from pytest_gostcnn.model.data import (
    INPUT_RANGE,
    WEIGHT_RANGE,
    draw_input,
    draw_out_residual,
    draw_weights,
)
from pytest_gostcnn.model.dtypes import PRECISIONS, master_dtype
from pytest_gostcnn.model.layers import Layer
from pytest_gostcnn.model.network import Network

from .error_model import Bounded, ErrorModelKernels, admissible_rmse

REFERENCE_GRADE = "reference-grade"
CORRECT = "correct"
NOT_CORRECT = "not correct"
NOT_VERIFIED = "not verified"  # the suite's own side failed: no verdict on the backend

# The host dtype a backend's arrays must come back in, where NumPy has the type.
HOST_DTYPES = {"float32": np.float32, "tf32": np.float32, "float16": np.float16}
# An array with fewer non-zero elements than this share says little about correctness.
MIN_NONZERO_SHARE = 0.01


@dataclass
class ArrayCheck:
    """One compared array: its СКО against its СКОП, or the reason it could not be compared."""

    name: str
    rmse: float | None
    admissible: float
    problem: str | None = None
    reference_problem: bool = False  # the problem is the reference array's (untrustworthy)

    @property
    def passed(self) -> bool:
        return (
            self.problem is None
            and self.rmse is not None
            and (self.rmse == 0 or self.rmse < self.admissible)
        )

    @property
    def ratio(self) -> float:
        """СКО / СКОП: below 1 passes; infinite when it could not be compared."""
        if self.problem is not None or self.rmse is None:
            return math.inf
        if self.rmse == 0:
            return 0.0
        return self.rmse / self.admissible if self.admissible > 0 else math.inf

    def as_dict(self) -> dict:
        return {
            "array": self.name,
            "rmse": self.rmse,
            "admissible_rmse": self.admissible,
            "ratio": None if math.isinf(self.ratio) else self.ratio,
            "problem": self.problem,
        }

    def describe(self) -> str:
        if self.problem is not None:
            return f"{self.name}: {self.problem}"
        return f"{self.name}: СКО {self.rmse:.3e} vs СКОП {self.admissible:.3e} ({self.ratio:.3g}x)"


@dataclass
class Verification:
    """The outcome of verifying one layer step or one network in one mode."""

    subject: str
    checks: list[ArrayCheck] = field(default_factory=list)
    error: str | None = None
    suite_failed: bool = False  # the error is the suite's own (SuiteError), not the backend's
    rows: tuple[str, ...] = ()  # a layer at a network's shape: the rows it stands for

    @property
    def verdict(self) -> str:
        if self.error is None:
            return verdict(self.checks)
        return NOT_VERIFIED if self.suite_failed else NOT_CORRECT

    @property
    def failed(self) -> bool:
        """Not verified correct: not correct, or not verified at all."""
        return self.verdict in (NOT_CORRECT, NOT_VERIFIED)

    @property
    def worst(self) -> ArrayCheck | None:
        return max(self.checks, key=lambda c: c.ratio, default=None)

    @property
    def first_failure(self) -> str | None:
        if self.error is not None:
            return self.error
        failed = next((c for c in self.checks if not c.passed), None)
        return failed.describe() if failed else None

    def as_dict(self) -> dict:
        return {
            "subject": self.subject,
            "verdict": self.verdict,
            "error": self.error,
            **({"rows": list(self.rows)} if self.rows else {}),
            "checks": [check.as_dict() for check in self.checks],
        }


def rmse(got: np.ndarray, reference: np.ndarray) -> float:
    """СКО: sqrt(mean((verified - reference)^2)), computed in float64."""
    difference = np.asarray(got, dtype=np.float64) - np.asarray(reference, dtype=np.float64)
    return math.sqrt(float(np.mean(difference * difference)))


def verdict(checks: Iterable[ArrayCheck]) -> str:
    """standard.md §6: reference-grade if every СКО is 0, correct if each is below its СКОП; not
    verified when the only failures are reference arrays too degenerate to judge by."""
    checks = list(checks)
    failed = [c for c in checks if not c.passed]
    if not checks or any(not c.reference_problem for c in failed):
        return NOT_CORRECT
    if failed:
        return NOT_VERIFIED
    return REFERENCE_GRADE if all(c.rmse == 0 for c in checks) else CORRECT


def untrustworthy(reference: np.ndarray) -> str | None:
    """Why a reference array is too degenerate for its СКО to mean much, or None."""
    if reference.size > 1 and np.all(reference == reference.flat[0]):
        return f"the reference array is constant ({reference.flat[0]:.3g}); untrustworthy"
    share = np.count_nonzero(reference) / reference.size
    if share < MIN_NONZERO_SHARE:
        return f"the reference array is {100 * (1 - share):.1f}% zeros; untrustworthy"
    return None


def check_array(
    name: str,
    got: np.ndarray,
    reference: Bounded,
    dtype: str,
    threshold: float | None = None,
    host_dtype: str | None = None,
) -> ArrayCheck:
    """Compare one array a backend returned (on the host) with the reference.

    ``threshold`` overrides СКОП as a share of the reference array's RMS; ``host_dtype`` is
    the type the array is kept in when it is not ``dtype`` (a float16 gradient, kept in
    float32: ``model.dtypes.MASTER_DTYPES``).
    """
    if dtype not in PRECISIONS:
        raise ValueError(_NO_MODEL.format(dtype=dtype))
    if threshold is None:
        admissible = admissible_rmse(reference)
    else:
        admissible = threshold * math.sqrt(float(np.mean(reference.value**2)))
    problem = _shape_dtype_problem(got, reference.value.shape, host_dtype or dtype)
    if problem is None and not np.all(np.isfinite(got)):
        bad = int(np.count_nonzero(~np.isfinite(got)))
        problem = f"{bad} of {got.size} elements are NaN or Inf"
    if problem is not None:
        return ArrayCheck(name, None, admissible, problem)
    problem = untrustworthy(reference.value)
    if problem is not None:
        return ArrayCheck(name, None, admissible, problem, reference_problem=True)
    return ArrayCheck(name, rmse(got, reference.value), admissible)


def _shape_dtype_problem(got: object, shape: tuple[int, ...], dtype: str) -> str | None:
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


_NO_MODEL = (
    "no error model derives СКОП for {dtype}: the suite verifies the floating-point types of "
    "model.dtypes.PRECISIONS and refuses the integer ones (standard.md §6)"
)


def _model(dtype: str) -> tuple[ErrorModelKernels, Callable[[np.ndarray], np.ndarray]]:
    """The reference with the error model of ``dtype``, and the rounding of drawn values.

    standard.md §6 gives both implementations the same values: the draws are rounded to the data
    type first, so the implementation receives them exactly and the reference computes
    on the very same numbers. Integer types have no model: ValueError.
    """
    precision = PRECISIONS.get(dtype)
    if precision is None:
        raise ValueError(_NO_MODEL.format(dtype=dtype))
    return ErrorModelKernels(precision, PRECISIONS[master_dtype(dtype)]), precision.round


def _comparer(
    result: Verification, backend: Backend, threshold: float | None
) -> Callable[..., None]:
    """A function that checks one array the backend returned and records the check;
    ``master=True`` for a gradient or an updated weight (kept in ``master_dtype``)."""

    def compare(name: str, got: object, reference: Bounded, master: bool = False) -> None:
        host_dtype = master_dtype(backend.dtype) if master else None
        result.checks.append(
            check_array(name, backend.to_host(got), reference, backend.dtype, threshold, host_dtype)
        )

    return compare


class SuiteError(Exception):
    """The suite's own side of a verification failed: drawing the data or computing the
    float64 reference (a MemoryError at a large batch, say), not the backend."""


def _suite_side(batch: int, prepare: Callable[[], Any]) -> Any:
    """``prepare()``, with any exception it raises turned into a ``SuiteError``."""
    try:
        return prepare()
    except Exception as exc:
        raise SuiteError(
            f"the suite failed drawing the data or computing the float64 reference at batch "
            f"{batch}, before the backend ran: {type(exc).__name__}: {exc}"
        ) from exc


def _guarded(subject: str, run: Callable[[Verification], None]) -> Verification:
    """Run a verification; a backend that raises fails it with the exception as reason."""
    result = Verification(subject)
    try:
        run(result)
    except SuiteError as exc:
        result.error, result.suite_failed = str(exc), True
    except ContractError as exc:
        result.error = str(exc)
    except Exception as exc:  # the backend's failure is the verdict, not a crash
        where = traceback.extract_tb(exc.__traceback__)[-1]
        result.error = (
            f"the backend raised {type(exc).__name__}: {exc} (at {where.filename}:{where.lineno})"
        )
    return result


def verify_network(
    backend: Backend,
    network: Network,
    mode: str,
    batch: int,
    seed: int,
    threshold: float | None = None,
    weights: str = "scaled",
) -> Verification:
    """Section 8 for one network: ``mode`` is "inference" or "training"; ``weights`` is the
    reading of 8.2's weight draw (standard.md §6), "scaled" or "full-range"."""
    subject = f"{network.latin}-{mode}-B{batch}"
    model, representable = _model(backend.dtype)

    def prepare() -> tuple:
        # The suite's side first, whole: the data and the float64 reference.
        rng = np.random.default_rng(seed)
        host_weights = {
            n: {k: representable(a) for k, a in ws.items()}
            for n, ws in draw_weights(network, rng, weights).items()
        }
        image = representable(draw_input(network, batch, rng))
        ref_weights = {
            n: {k: model.bound(a) for k, a in ws.items()} for n, ws in host_weights.items()
        }
        if mode == "inference":
            reference = executor.infer(network, model, ref_weights, model.bound(image))
            return host_weights, image, None, ref_weights, reference
        out_residual = representable(draw_out_residual(network, batch, rng))
        reference = executor.train(
            network, model, ref_weights, model.bound(image), model.bound(out_residual)
        )
        return host_weights, image, out_residual, ref_weights, reference

    def run(result: Verification) -> None:
        host_weights, image, out_residual, ref_weights, reference = _suite_side(batch, prepare)
        loaded = backend.load_weights(network, host_weights)
        compare = _comparer(result, backend, threshold)
        if mode == "inference":
            output = backend.infer(network, loaded, backend.to_device(image))
            backend.synchronize()
            compare("output", output, reference)
            return
        got = backend.train(
            network, loaded, backend.to_device(image), backend.to_device(out_residual)
        )
        backend.synchronize()
        _compare_training(compare, network, got, loaded, reference, ref_weights)

    return _guarded(subject, run)


def _compare_training(
    compare: Callable[[str, object, Bounded], None],
    network: Network,
    got: executor.TrainingResult,
    weights: executor.Weights,
    reference: executor.TrainingResult,
    ref_weights: executor.Weights,
) -> None:
    """What one training iteration is judged by (standard.md §6): the output, the residual
    at the network input, every gradient and every updated weight array."""
    compare("output", got.output, reference.output)
    compare("input residual", got.input_residual, reference.input_residual)
    for layer in network.weight_layers:
        for name in layer.weight_shapes:
            compare(
                f"row {layer.number} {name} gradient",
                got.gradients[layer.number][name],
                reference.gradients[layer.number][name],
                master=True,
            )
            compare(
                f"row {layer.number} {name} updated",
                weights[layer.number][name],
                ref_weights[layer.number][name],
                master=True,
            )


def _check_range(maps: list[Bounded], master: list[Bounded], dtype: str) -> None:
    """A SuiteError when a round's float64 reference is not finite or outgrows the data
    type (``maps``) or the type gradients and weights are kept in (``master``): training
    carries the benchmark's weights from round to round, and where they have grown past
    what the type holds, a backend that overflows is not at fault."""
    for arrays, kept in ((maps, dtype), (master, master_dtype(dtype))):
        limit = PRECISIONS[kept].largest if kept in PRECISIONS else math.inf
        peaks = [float(np.max(np.abs(a.value))) for a in arrays if a.value.size]
        largest = max(peaks, default=0.0) if all(map(math.isfinite, peaks)) else math.inf
        if largest > limit:
            raise SuiteError(
                f"the float64 reference of this round reaches {largest:.3g}, beyond {kept}'s "
                f"largest value {limit:.5g}: the weights the round started from have grown "
                "past what the type holds over the rounds before it; no verdict on the round"
            )


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
) -> Verification:
    """Audit one timed round (standard.md §7.7) by section 8's rule on that round's data.

    ``weights`` are the host weights the round started from (inference: those the backend
    was given, rounded here as ``to_device`` rounded them; training: those a correct
    backend holds, replayed on the host from the segment's start and stored in the type it
    keeps them in, ``performance/replay.py``), ``image`` and ``out_residual`` the host
    arrays it was given; ``result`` is what the backend returned (the output map, or a
    TrainingResult) and ``updated`` its weights after a training round. The float64
    reference runs one iteration from the same values.
    """
    subject = f"{network.latin}-{mode} round"
    model, representable = _model(backend.dtype)
    held = representable if mode == "inference" else (lambda array: array)

    def prepare() -> tuple:
        ref_weights = {  # replayed weights come bounded, with the error of the rounds before
            n: {
                k: a if isinstance(a, Bounded) else model.bound(held(np.asarray(a, np.float64)))
                for k, a in ws.items()
            }
            for n, ws in weights.items()
        }
        ref_image = model.bound(representable(np.asarray(image, dtype=np.float64)))
        if mode == "inference":
            return executor.infer(network, model, ref_weights, ref_image), ref_weights
        ref_residual = model.bound(representable(np.asarray(out_residual, dtype=np.float64)))
        return executor.train(network, model, ref_weights, ref_image, ref_residual), ref_weights

    def run(verification: Verification) -> None:
        reference, ref_weights = _suite_side(image.shape[0], prepare)
        master = [w for ws in ref_weights.values() for w in ws.values()]
        compare = _comparer(verification, backend, threshold)
        if mode == "inference":
            _check_range([reference], master, backend.dtype)
            compare("output", result, reference)
        else:
            master += [g for gs in reference.gradients.values() for g in gs.values()]
            _check_range([reference.output, reference.input_residual], master, backend.dtype)
            _compare_training(compare, network, result, updated, reference, ref_weights)

    return _guarded(subject, run)


STEPS = ("forward", "backward", "gradient", "update")


def layer_steps(layer: Layer) -> tuple[str, ...]:
    """The steps of standard.md §3 a layer has: gradient and update only with weights."""
    return STEPS if layer.has_weights else STEPS[:2]


@dataclass(frozen=True)
class LayerData:
    """The suite's side of one layer's verification: the host draws, in the data type, and
    the float64 reference (with its error model) of every step through ``last``."""

    last: str
    inputs: list[np.ndarray]
    weights: dict[str, np.ndarray]
    residuals: list[np.ndarray]
    reference: dict[str, Any]


def prepare_layer(
    layer: Layer,
    last: str,
    batch: int,
    seed: int,
    dtype: str,
    draw_input: Callable[[np.random.Generator, tuple[int, ...]], np.ndarray] | None = None,
) -> LayerData:
    """Draw one layer's data and compute its reference through step ``last``.

    Input maps come from ``draw_input`` (default U(-127, 128)), output residuals from
    U(-127, 128), weights from U(-1, 1), as section 8 draws them; every step's reference
    needs the ones before it (backward needs forward's OUT).
    """
    model, representable = _model(dtype)
    rng = np.random.default_rng(seed)
    draw = draw_input or (lambda g, shape: g.uniform(*INPUT_RANGE, size=shape))
    host_inputs = [representable(draw(rng, (batch, *s))) for s in layer.in_shapes]
    host_weights = {
        k: representable(rng.uniform(*WEIGHT_RANGE, size=s)) for k, s in layer.weight_shapes.items()
    }
    host_residuals = [
        representable(rng.uniform(*INPUT_RANGE, size=(batch, *s))) for s in layer.out_shapes
    ]
    steps = STEPS.index(last)
    ref_in = [model.bound(a) for a in host_inputs]
    ref_w = {k: model.bound(a) for k, a in host_weights.items()}
    ref: dict[str, Any] = {"forward": model.forward(layer, ref_in, ref_w)}
    ref_res = [model.bound(a) for a in host_residuals]
    if steps >= 1:
        ref["backward"] = model.backward(layer, ref_in, ref["forward"], ref_res, ref_w)
    if steps >= 2:
        ref["gradient"] = model.gradient(layer, ref_in, ref_res)
    if steps >= 3:
        model.update(layer, ref_w, ref["gradient"], batch)
        ref["update"] = ref_w
    return LayerData(last, host_inputs, host_weights, host_residuals, ref)


class ContractError(Exception):
    """A kernel wrote into an array it was given to read (the backend contract forbids it)."""


class _Arguments:
    """The arrays the kernels of one layer item read, as the backend held them, to check
    after each kernel that it left them as they were."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.watched: list[tuple[str, object, np.ndarray]] = []

    def watch(self, name: str, device: object, host: np.ndarray | None = None) -> None:
        """Watch ``device``; its expected contents are ``host`` or what it holds now."""
        expected = np.array(self.backend.to_host(device) if host is None else host, copy=True)
        self.watched.append((name, device, expected))

    def forget(self, devices: Iterable[object]) -> None:
        """Stop watching ``devices`` (the weights, which ``update`` may change)."""
        gone = {id(device) for device in devices}
        self.watched = [w for w in self.watched if id(w[1]) not in gone]

    def check(self, kernel: str) -> None:
        for name, device, expected in self.watched:
            now = np.asarray(self.backend.to_host(device))
            if now.shape != expected.shape or not np.array_equal(
                now.astype(np.float64), expected.astype(np.float64), equal_nan=True
            ):
                changed = (
                    "its shape"
                    if now.shape != expected.shape
                    else f"{int(np.count_nonzero(now != expected))} of {now.size} elements"
                )
                raise ContractError(
                    f"{kernel} wrote into its argument {name} ({changed} changed); kernels "
                    "must not change the arrays they are given (only update changes the weights)"
                )


def verify_layer(
    backend: Backend,
    layer: Layer,
    step: str,
    batch: int,
    seed: int,
    subject: str,
    threshold: float | None = None,
    draw_input: Callable[[np.random.Generator, tuple[int, ...]], np.ndarray] | None = None,
    prepare: Callable[[], LayerData] | None = None,
) -> Verification:
    """One step of one layer, after the steps before it (backward needs forward's OUT).

    The data and reference come from ``prepare`` when given (the suite shares one
    ``prepare_layer`` among a layer's steps), else from ``prepare_layer`` with ``seed``.
    After every kernel the arrays it read are checked unchanged: a kernel that writes into
    its inputs fails the item, naming the kernel and the argument.
    """

    def own() -> LayerData:
        return prepare_layer(layer, step, batch, seed, backend.dtype, draw_input)

    def run(result: Verification) -> None:
        data = _suite_side(batch, prepare or own)
        if STEPS.index(data.last) < STEPS.index(step):
            raise ValueError(f"the prepared data reach {data.last}, not {step}")
        ref = data.reference
        name = layer.type.name
        arguments = _Arguments(backend)
        dev_in = [backend.to_device(a) for a in data.inputs]
        dev_w = {k: backend.to_device(a) for k, a in data.weights.items()}
        for i, (device, host) in enumerate(zip(dev_in, data.inputs, strict=True)):
            arguments.watch(f"IN{i + 1}", device, host)
        for k, device in dev_w.items():
            arguments.watch(k.upper(), device, data.weights[k])
        compare = _comparer(result, backend, threshold)

        dev_out = backend.forward(layer, dev_in, dev_w)
        arguments.check(f"{name} forward")
        if step == "forward":
            ref_out = ref["forward"]
            for i, (got, want) in enumerate(zip(dev_out, ref_out, strict=True)):
                compare(f"OUT{i + 1 if len(ref_out) > 1 else ''}", got, want)
            return
        dev_res = [backend.to_device(a) for a in data.residuals]
        for i, device in enumerate(dev_out):
            arguments.watch(f"OUT{i + 1}", device)
        for i, (device, host) in enumerate(zip(dev_res, data.residuals, strict=True)):
            arguments.watch(f"OUT{i + 1}_D", device, host)
        dev_in_res = backend.backward(layer, dev_in, dev_out, dev_res, dev_w)
        arguments.check(f"{name} backward")
        if step == "backward":
            ref_in_res = ref["backward"]
            for i, (got, want) in enumerate(zip(dev_in_res, ref_in_res, strict=True)):
                compare(f"IN{i + 1 if len(ref_in_res) > 1 else ''}_D", got, want)
            return
        dev_grads = backend.gradient(layer, dev_in, dev_res)
        arguments.check(f"{name} gradient")
        if step == "gradient":
            for k in layer.weight_shapes:
                compare(f"{k.upper()}_D", dev_grads[k], ref["gradient"][k], master=True)
            return
        # update changes the weights by contract; the gradients and the rest it only reads.
        arguments.forget(dev_w.values())
        for k, device in dev_grads.items():
            arguments.watch(f"{k.upper()}_D", device)
        backend.update(layer, dev_w, dev_grads, batch)
        backend.synchronize()
        arguments.check(f"{name} update")
        for k in layer.weight_shapes:
            compare(f"{k.upper()} updated", dev_w[k], ref["update"][k], master=True)

    return _guarded(subject, run)
