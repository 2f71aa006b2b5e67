"""Section 8 for one layer: one of its steps (standard.md §3) after the steps before it,
with every kernel checked to leave the arrays it reads as they were.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from pytest_gostcnn.backend import Backend
from pytest_gostcnn.model.data import INPUT_RANGE, WEIGHT_RANGE
from pytest_gostcnn.model.executor import check_gradients, check_maps
from pytest_gostcnn.model.fixed_point import ScaleTable, integer_type
from pytest_gostcnn.model.layers import Layer
from pytest_gostcnn.reference.library import NUMPY, ReferenceLibrary

from . import fixed_point
from .harness import ContractError, comparer, guarded, model_of, suite_side
from .verdicts import RMSE, Verification

# What a failure of a saturating item's СКО means (fixed_point.saturating_scale).
SATURATING_NOTE = (
    "about a tenth of its values lie past the output's range: they must saturate (clamp to "
    "the range's end), not wrap around"
)

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
    # An integer type's data: the scales of every array (fixed_point, inference only).
    scales: ScaleTable | None = None


def prepare_layer(
    layer: Layer,
    last: str,
    batch: int,
    seed: int,
    dtype: str,
    draw_input: Callable[[np.random.Generator, tuple[int, ...]], np.ndarray] | None = None,
    saturating: bool = False,
    library: ReferenceLibrary = NUMPY,
) -> LayerData:
    """Draw one layer's data and compute its reference through step ``last``.

    Input maps come from ``draw_input`` (default U(-127, 128)), output residuals from
    U(-127, 128), weights from U(-1, 1), as section 8 draws them; every step's reference
    needs the ones before it (backward needs forward's OUT). An integer type's data are
    quantised and verify forward only (``fixed_point.prepare_layer``); ``saturating``, an
    integer type's only, gives the output a scale too small for its values. ``library``:
    the array library the float64 reference runs on (an integer type's runs on NumPy).
    """
    itype = integer_type(dtype)
    if saturating and itype is None:
        raise ValueError(f"a saturating layer item is an integer type's, not {dtype}'s")
    if itype is not None:
        if last != "forward":
            raise ValueError(f"{dtype} verifies inference only: a layer's forward, not {last}")
        data = fixed_point.prepare_layer(layer, batch, seed, itype, draw_input, saturating)
        reference = {"forward": data.reference}
        return LayerData(last, data.inputs, data.weights, [], reference, data.scales)
    model, representable = model_of(dtype, library)
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
    given_in, given_out = layer.given_to_backward(ref_in, ref["forward"])
    if steps >= 1:
        ref["backward"] = model.backward(layer, given_in, given_out, ref_res, ref_w)
    if steps >= 2:
        ref["gradient"] = model.gradient(layer, given_in, ref_res)
    if steps >= 3:
        model.update(layer, ref_w, ref["gradient"], batch)
        ref["update"] = ref_w
    return LayerData(last, host_inputs, host_weights, host_residuals, ref)


class _Arguments:
    """The arrays the kernels of one layer item read, as the backend held them, to check
    after each kernel that it left them as they were."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.watched: list[tuple[str, object, np.ndarray]] = []
        self.converted: set[str] = set()  # the names whose host copy was tried in the device's type

    def watch(self, name: str, device: object, host: np.ndarray | None = None) -> None:
        """Watch ``device``; its expected contents are ``host`` or what it holds now."""
        expected = np.array(self.backend.to_host(device) if host is None else host, copy=True)
        self.watched.append((name, device, expected))

    def forget(self, devices: Iterable[object]) -> None:
        """Stop watching ``devices`` (the weights, which ``update`` may change)."""
        gone = {id(device) for device in devices}
        self.watched = [w for w in self.watched if id(w[1]) not in gone]

    def check(self, kernel: str) -> None:
        for i, (name, device, expected) in enumerate(self.watched):
            now = np.asarray(self.backend.to_host(device))
            if name not in self.converted and now.dtype != expected.dtype:
                # The host's float64 draws, held by the backend in its type: kept in that
                # type where it holds them exactly, the later checks compare bytes (a NaN,
                # which no draw holds, keeps the float64 copy and the slower comparison).
                # Tried once: values the type does not hold stay float64 for every check.
                self.converted.add(name)
                with np.errstate(invalid="ignore", over="ignore"):
                    held = expected.astype(now.dtype)
                if np.array_equal(held.astype(expected.dtype), expected):
                    expected = held
                    self.watched[i] = (name, device, held)
            if _same_bytes(now, expected):
                continue  # the common case, checked without float64 copies of both
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


def _same_bytes(now: np.ndarray, expected: np.ndarray) -> bool:
    """Whether ``now`` holds ``expected``'s very bytes (same type and shape); where it does
    not, a kernel may still have left every value as it was (a -0.0 for a 0.0, another NaN)."""
    return (
        now.dtype == expected.dtype
        and now.shape == expected.shape
        and np.array_equal(_as_bits(now), _as_bits(expected))
    )


def _as_bits(a: np.ndarray) -> np.ndarray:
    """``a``'s bytes as unsigned integers of its item's size (one comparison an element)."""
    size = a.dtype.itemsize
    return np.ascontiguousarray(a).view(f"u{size}" if size in (1, 2, 4, 8) else np.uint8)


class _LayerRun:
    """One layer's kernels run step after step on device copies of the prepared data, the
    arrays each step reads watched before it runs (``_Arguments``)."""

    def __init__(self, backend: Backend, layer: Layer, data: LayerData, batch: int) -> None:
        self.backend, self.layer, self.data, self.batch = backend, layer, data, batch
        self.arguments = _Arguments(backend)
        if data.scales is not None:
            backend.use_scales(data.scales)
        self.inputs = [backend.to_device(a) for a in data.inputs]
        self.weights = {k: backend.to_device(a) for k, a in data.weights.items()}
        for i, (device, host) in enumerate(zip(self.inputs, data.inputs, strict=True)):
            self.arguments.watch(f"IN{i + 1}", device, host)
        for k, device in self.weights.items():
            self.arguments.watch(k.upper(), device, data.weights[k])

    def forward(self) -> None:
        self.outputs = self.backend.forward(self.layer, self.inputs, self.weights)
        check_maps(
            self.backend, self.layer, "forward", self.outputs, self.layer.out_shapes, self.batch
        )

    def backward(self) -> None:
        self.residuals = [self.backend.to_device(a) for a in self.data.residuals]
        for i, device in enumerate(self.outputs):
            self.arguments.watch(f"OUT{i + 1}", device)
        for i, (device, host) in enumerate(zip(self.residuals, self.data.residuals, strict=True)):
            self.arguments.watch(f"OUT{i + 1}_D", device, host)
        # The maps a network's backward and gradient steps are given, no more.
        inputs, outputs = self.layer.given_to_backward(self.inputs, self.outputs)
        self.in_residuals = self.backend.backward(
            self.layer, inputs, outputs, self.residuals, self.weights
        )
        shapes = self.layer.in_shapes
        check_maps(self.backend, self.layer, "backward", self.in_residuals, shapes, self.batch)

    def gradient(self) -> None:
        inputs, _ = self.layer.given_to_backward(self.inputs, self.outputs)
        self.grads = self.backend.gradient(self.layer, inputs, self.residuals)
        check_gradients(self.backend, self.layer, self.grads)

    def update(self) -> None:
        # update changes the weights by contract; the gradients and the rest it only reads.
        self.arguments.forget(self.weights.values())
        for k, device in self.grads.items():
            self.arguments.watch(f"{k.upper()}_D", device)
        self.backend.update(self.layer, self.weights, self.grads, self.batch)
        self.backend.synchronize()

    def judged(self, step: str) -> list[tuple[str, object, Any]]:
        """What ``step`` is judged by: (array name, what the backend holds, the reference)."""
        reference = self.data.reference[step]
        if step in ("forward", "backward"):
            got = self.outputs if step == "forward" else self.in_residuals
            name = "OUT{}" if step == "forward" else "IN{}_D"
            number = len(reference) > 1  # maps are numbered where the step has several
            return [
                (name.format(i + 1 if number else ""), array, want)
                for i, (array, want) in enumerate(zip(got, reference, strict=True))
            ]
        got, suffix = (self.grads, "_D") if step == "gradient" else (self.weights, " updated")
        return [(f"{k.upper()}{suffix}", got[k], reference[k]) for k in self.layer.weight_shapes]


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
    saturating: bool = False,
    library: ReferenceLibrary = NUMPY,
) -> Verification:
    """One step of one layer, after the steps before it (backward needs forward's OUT).

    The data and reference come from ``prepare`` when given (the suite shares one
    ``prepare_layer`` among a layer's steps), else from ``prepare_layer`` with ``seed``.
    After every kernel the arrays it read are checked unchanged: a kernel that writes into
    its inputs fails the item, naming the kernel and the argument. An integer type's arrays
    are checked by СКО and by their mean error (``harness.mean_error_check``);
    ``saturating`` and ``library`` are ``prepare_layer``'s.
    """

    def own() -> LayerData:
        return prepare_layer(
            layer, step, batch, seed, backend.dtype, draw_input, saturating, library
        )

    def verify(result: Verification) -> None:
        data = suite_side(batch, prepare or own)
        if STEPS.index(data.last) < STEPS.index(step):
            raise ValueError(f"the prepared data reach {data.last}, not {step}")
        kernels = _LayerRun(backend, layer, data, batch)
        for current in STEPS[: STEPS.index(step) + 1]:
            getattr(kernels, current)()
            kernels.arguments.check(f"{layer.type.name} {current}")
        compare = comparer(result, backend, threshold)
        scales = data.scales[layer.number].outputs if data.scales is not None else None
        for i, (name, got, want) in enumerate(kernels.judged(step)):
            scale = None if scales is None else scales[i]
            compare(name, got, want, master=step in ("gradient", "update"), scale=scale, mean=True)
        if saturating:
            for check in result.checks:
                if not check.passed and check.statistic == RMSE:
                    check.note = SATURATING_NOTE
        if data.scales is not None:
            result.scales = fixed_point.scale_record(data.scales)

    return guarded(subject, verify)
