"""The one schedule of the four training steps (standard.md §3), for any kernels.

``infer`` runs forward up the table; ``train`` runs forward, backward down the table
(residuals summed at a fan-out), gradient and update. Every array a kernel returns is
checked against the table's shapes; a wrong one raises ``KernelError``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from .layers import NETWORK_INPUT, Layer, MapRef, Shape
from .network import Network

Array = Any  # a NumPy, CuPy or other backend array: anything with a ``.shape``
Weights = dict[int, dict[str, Array]]


class KernelError(ValueError):
    """A kernel returned the wrong number of arrays, the wrong keys, or the wrong shapes."""


class Kernels(Protocol):
    """The four steps of one layer, as a backend provides them (standard.md §3).

    ``inputs``/``outputs``/``out_residuals`` are lists with one array per map, shaped
    [B][X][Y][L]; ``backward`` and ``gradient`` are given IN and OUT only where Appendix A
    reads them (``Layer.given_to_backward``), an empty list otherwise. ``forward`` returns
    one array per output; ``backward`` returns one residual per input; ``gradient`` returns
    the ``*_D`` arrays keyed and shaped like the layer's weights (``Layer.weight_shapes``).

    Kernels must not modify their argument arrays: the executor hands one array to several
    places (a map to every layer that reads it and to later steps, one residual to several
    maps). The exception is ``update``, which changes ``weights`` in place.
    """

    def forward(self, layer: Layer, inputs: list, weights: dict) -> list: ...

    def backward(
        self, layer: Layer, inputs: list, outputs: list, out_residuals: list, weights: dict
    ) -> list: ...

    def gradient(self, layer: Layer, inputs: list, out_residuals: list) -> dict: ...

    def update(self, layer: Layer, weights: dict, grads: dict, batch: int) -> None: ...


@dataclass
class TrainingResult:
    """What one training iteration produced; the weights were updated in place."""

    output: Array
    input_residual: Array
    gradients: Weights


def infer(network: Network, kernels: Kernels, weights: Mapping[int, dict], image: Array) -> Array:
    """Forward over the table; return the last row's output map."""
    _check_argument("image", image, network.input_shape)
    maps = _forward(network, kernels, weights, image, keep=frozenset())
    return maps[network.layers[-1].outputs[0]]


def train(
    network: Network,
    kernels: Kernels,
    weights: Weights,
    image: Array,
    out_residual: Array,
) -> TrainingResult:
    """One training iteration (section 9.3): forward, backward, gradient, update.

    ``out_residual`` is the residual array of the network output, filled by the caller.
    ``weights`` is updated in place (``W += W_D / B``).
    """
    batch = _check_argument("image", image, network.input_shape)
    _check_argument("out_residual", out_residual, network.output_shape, batch)
    ends: list = []
    gradients = train_in_slices(
        network,
        kernels,
        weights,
        [slice(0, batch)],
        lambda span: (image, out_residual),
        lambda span, output, input_residual: ends.extend((output, input_residual)),
    )
    return TrainingResult(output=ends[0], input_residual=ends[1], gradients=gradients)


def train_in_slices(
    network: Network,
    kernels: Kernels,
    weights: Weights,
    spans: list[slice],
    data: Callable[[slice], tuple[Array, Array]],
    take: Callable[[slice, Array, Array], None],
) -> Weights:
    """One training iteration of the batch ``spans`` cut (contiguous, in order, from 0) a
    slice of its images at a time; return the gradients, the weights updated in place.

    Args:
        data: a slice's image and output residual, ``data(span)``.
        take: given each slice's output and input residual, ``take(span, output, residual)``.

    Every image's forward and backward is its own; only a weight gradient sums over the
    batch: each is summed slice by slice in the order of ``spans`` (kernels with
    ``gradient_part`` and ``gradient_total`` give the parts a sum of theirs needs, as the
    error model's does), then every weight array is updated. One span is ``train``: the
    values are those of the whole batch at once; several change them at float64 rounding
    (standard.md §6, "Where the reference runs").
    """
    batch = spans[-1].stop
    sliced = len(spans) > 1
    sums: Weights = {}
    for span in spans:
        image, out_residual = data(span)
        _check_argument("image", image, network.input_shape, span.stop - span.start)
        _check_argument("out_residual", out_residual, network.output_shape, image.shape[0])
        output, input_residual = _train_slice(
            network, kernels, weights, image, out_residual, sums, batch if sliced else None
        )
        take(span, output, input_residual)
        del output, input_residual, image, out_residual
    gradients = sums
    if sliced and hasattr(kernels, "gradient_total"):
        # Layer by layer, each sum released once its gradient is made.
        gradients = {}
        for layer in network.weight_layers:
            part = sums.pop(layer.number)
            gradients[layer.number] = kernels.gradient_total(layer, part, batch)
    # The updates run after every backward step, in the standard's order (no other row
    # reads a layer's weights, so the values would be the same either way).
    for layer in network.weight_layers:
        kernels.update(layer, weights[layer.number], gradients[layer.number], batch)
    return gradients


def _train_slice(
    network: Network,
    kernels: Kernels,
    weights: Weights,
    image: Array,
    out_residual: Array,
    sums: Weights,
    whole: int | None,
) -> tuple[Array, Array]:
    """Forward and backward of one slice of the batch, each layer's gradient added into
    ``sums`` in place as soon as it is made (the parts of the sum over the ``whole`` batch
    where that is given and the kernels sum parts: ``train_in_slices``); no update."""
    batch = image.shape[0]
    # A training forward pass keeps a map only if a later step reads it (a layer whose
    # backward or gradient needs IN or OUT: LayerType.keeps_inputs / keeps_outputs).
    kept = kept_for_backward(network)
    maps = _forward(network, kernels, weights, image, keep=kept.keys())
    output_ref = network.layers[-1].outputs[0]
    output = maps[output_ref]
    if output_ref not in kept:
        del maps[output_ref]
    parts = whole is not None and hasattr(kernels, "gradient_part")

    # Backward frees a kept map after the lowest-numbered step that reads it.
    release_at = {ref: min(rows) for ref, rows in kept.items()}
    residuals: dict[MapRef, Array] = {output_ref: out_residual}
    for layer in reversed(network.layers):
        layer_weights = weights.get(layer.number, {})
        in_refs, out_refs = layer.given_to_backward(layer.inputs, layer.outputs)
        inputs, outputs = [maps[r] for r in in_refs], [maps[r] for r in out_refs]
        out_residuals = [residuals.pop(r) for r in layer.outputs]
        in_residuals = kernels.backward(layer, inputs, outputs, out_residuals, layer_weights)
        check_maps(kernels, layer, "backward", in_residuals, layer.in_shapes, batch)
        for ref, residual in zip(layer.inputs, in_residuals, strict=True):
            # Out of place: a kernel may return one array for several inputs (eltwise).
            residuals[ref] = residuals[ref] + residual if ref in residuals else residual
        # A layer's gradient reads only its IN and OUT_D, both fixed once its backward step
        # is done: it runs now and OUT_D is released, so one step's residuals are held,
        # not the network's; the values are those of the standard's step order.
        if layer.has_weights:
            if parts:
                grads = kernels.gradient_part(layer, inputs, out_residuals, whole)
            else:
                grads = kernels.gradient(layer, inputs, out_residuals)
                check_gradients(kernels, layer, grads)
            if layer.number in sums:
                held = sums[layer.number]
                for name in held:  # in place: the arrays are the first slice's own
                    held[name] += grads[name]
            else:
                sums[layer.number] = grads
            del grads
        del inputs, outputs, out_residuals, in_residuals
        for ref in [r for r, row in release_at.items() if row == layer.number]:
            del maps[ref], release_at[ref]
    return output, residuals.pop(NETWORK_INPUT)


def _forward(
    network: Network,
    kernels: Kernels,
    weights: Mapping[int, dict],
    image: Array,
    keep: Collection[MapRef],
) -> dict[MapRef, Array]:
    """Forward up the table; return the maps in ``keep`` and the network output.

    Every other map is dropped after its last reader.
    """
    batch = image.shape[0]
    last_reader = {ref: readers[-1].number for ref, readers in network.consumers().items()}
    maps: dict[MapRef, Array] = {NETWORK_INPUT: image}
    for layer in network.layers:
        outputs = kernels.forward(
            layer, [maps[r] for r in layer.inputs], weights.get(layer.number, {})
        )
        check_maps(kernels, layer, "forward", outputs, layer.out_shapes, batch)
        maps.update(zip(layer.outputs, outputs, strict=True))
        for ref in set(layer.inputs):
            if last_reader[ref] == layer.number and ref not in keep:
                del maps[ref]
    return maps


def kept_for_backward(network: Network) -> dict[MapRef, list[int]]:
    """Maps a training forward pass must keep, with the rows whose later steps read them."""
    kept: dict[MapRef, list[int]] = {}
    for layer in network.layers:
        if layer.type.keeps_inputs:
            for ref in layer.inputs:
                kept.setdefault(ref, []).append(layer.number)
        if layer.type.keeps_outputs:
            for ref in layer.outputs:
                kept.setdefault(ref, []).append(layer.number)
    return kept


# Checks at the boundary: the caller's arrays and every kernel's return value. -----------


def _check_argument(name: str, array: Array, shape: Shape, batch: int | None = None) -> int:
    """Check a map the caller passed: [B, *shape], with ``batch`` as B if given; return B.

    Checked here so that a wrong argument is not reported as a kernel's wrong return.
    """
    got = _shape(array)
    if (
        got is None
        or len(got) != 4
        or got[1:] != tuple(shape)
        or (batch is not None and got[0] != batch)
    ):
        expected = f"[{'B' if batch is None else batch}, {', '.join(map(str, shape))}]"
        raise ValueError(f"{name}: expected an array of shape {expected}, got {_describe(array)}")
    return got[0]


def check_maps(
    kernels: Kernels, layer: Layer, step: str, got: Any, shapes: tuple[Shape, ...], batch: int
) -> None:
    """A forward or backward return: one [B][X][Y][L] array per output or per input."""
    if step == "forward":
        names = [f"output {layer.output_name(i)}" for i in range(len(shapes))]
    else:
        names = [f"residual of in{i + 1}" for i in range(len(shapes))]
    if not isinstance(got, list | tuple) or len(got) != len(shapes):
        count = f"a list of {len(shapes)} array(s) ({', '.join(names)})"
        found = f"{len(got)} item(s)" if isinstance(got, list | tuple) else _describe(got)
        raise _kernel_error(kernels, layer, step, f"expected {count}, got {found}")
    for name, array, shape in zip(names, got, shapes, strict=True):
        expected = (batch, *shape)
        if _shape(array) != expected:
            raise _kernel_error(
                kernels, layer, step, f"{name}: expected shape {expected}, got {_describe(array)}"
            )


def check_gradients(kernels: Kernels, layer: Layer, got: Any) -> None:
    """A gradient return: the layer's weight names, each array shaped like its weight."""
    if not isinstance(got, Mapping) or set(got) != set(layer.weight_shapes):
        found = f"keys {sorted(map(str, got))}" if isinstance(got, Mapping) else _describe(got)
        expected = sorted(layer.weight_shapes)
        raise _kernel_error(
            kernels, layer, "gradient", f"expected a dict with keys {expected}, got {found}"
        )
    for name, shape in layer.weight_shapes.items():
        if _shape(got[name]) != tuple(shape):
            raise _kernel_error(
                kernels,
                layer,
                "gradient",
                f"{name}: expected shape {tuple(shape)}, got {_describe(got[name])}",
            )


def _kernel_error(kernels: Kernels, layer: Layer, step: str, problem: str) -> KernelError:
    return KernelError(
        f"{type(kernels).__name__}.{step} of row {layer.number} ({layer.type.name}): {problem}"
    )


def _shape(array: Any) -> tuple[int, ...] | None:
    shape = getattr(array, "shape", None)
    return None if shape is None else tuple(shape)


def _describe(array: Any) -> str:
    shape = _shape(array)
    return f"shape {shape}" if shape is not None else f"a {type(array).__name__} with no shape"
