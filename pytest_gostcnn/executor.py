"""The one schedule of the four training steps (SPEC §3, section 7.3), for any kernels.

``infer`` runs forward over the table in increasing row order. ``train`` runs one training
iteration: forward; backward in decreasing row order, summing the residuals a map receives
from each layer that reads it (SPEC §3 gap, fan-out); gradient for every layer with
weights; then update of every weight array.

Gradient of a layer reads only its IN and OUT_D, both fixed once its backward step is done,
so it runs right after that step and OUT_D is released at once; the values are those of the
standard's step order, and the memory held is one step's worth rather than every residual
of the network. The updates run after all backward steps, so backward always sees the
weights the forward pass used (section 7.3).

Memory: the forward pass of inference drops each map after its last reader. A training
forward pass keeps a map only if a later step reads it (a layer whose backward or gradient
needs IN or OUT, see ``LayerType.keeps_inputs``/``keeps_outputs``), and backward drops it
after the last such step.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from .layers import NETWORK_INPUT, Layer, MapRef
from .network import Network

Array = Any  # a NumPy, CuPy or other backend array
Weights = dict[int, dict[str, Array]]


class Kernels(Protocol):
    """The four steps of one layer, as a backend provides them (SPEC §3).

    ``inputs``/``outputs``/``out_residuals`` are lists with one array per map, shaped
    [B][X][Y][L]. ``backward`` returns one residual per input; ``gradient`` returns the
    ``*_D`` arrays keyed like the layer's weights; ``update`` changes ``weights`` in place.
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
    last_reader = _last_reader(network)
    maps: dict[MapRef, Array] = {NETWORK_INPUT: image}
    for layer in network.layers:
        outputs = kernels.forward(
            layer, [maps[r] for r in layer.inputs], weights.get(layer.number, {})
        )
        maps.update(zip(layer.outputs, outputs, strict=True))
        for ref in set(layer.inputs):
            if last_reader[ref] == layer.number:
                del maps[ref]
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
    kept = _kept_for_backward(network)
    last_reader = _last_reader(network)
    maps: dict[MapRef, Array] = {NETWORK_INPUT: image}
    for layer in network.layers:
        outputs = kernels.forward(
            layer, [maps[r] for r in layer.inputs], weights.get(layer.number, {})
        )
        maps.update(zip(layer.outputs, outputs, strict=True))
        for ref in set(layer.inputs):
            if last_reader[ref] == layer.number and ref not in kept:
                del maps[ref]
    output_ref = network.layers[-1].outputs[0]
    output = maps[output_ref]
    if output_ref not in kept:
        del maps[output_ref]

    # Backward frees a kept map after the lowest-numbered step that reads it.
    release_at = {ref: min(rows) for ref, rows in kept.items()}
    residuals: dict[MapRef, Array] = {output_ref: out_residual}
    gradients: Weights = {}
    for layer in reversed(network.layers):
        layer_weights = weights.get(layer.number, {})
        inputs = [maps[r] for r in layer.inputs] if layer.type.keeps_inputs else []
        outputs = [maps[r] for r in layer.outputs] if layer.type.keeps_outputs else []
        out_residuals = [residuals.pop(r) for r in layer.outputs]
        in_residuals = kernels.backward(layer, inputs, outputs, out_residuals, layer_weights)
        for ref, residual in zip(layer.inputs, in_residuals, strict=True):
            # Out of place: a kernel may return one array for several inputs (eltwise).
            residuals[ref] = residuals[ref] + residual if ref in residuals else residual
        if layer.has_weights:
            gradients[layer.number] = kernels.gradient(layer, inputs, out_residuals)
        del inputs, outputs, out_residuals, in_residuals
        for ref in [r for r, row in release_at.items() if row == layer.number]:
            del maps[ref], release_at[ref]

    batch = out_residual.shape[0]
    for layer in network.weight_layers:
        kernels.update(layer, weights[layer.number], gradients[layer.number], batch)
    return TrainingResult(
        output=output, input_residual=residuals.pop(NETWORK_INPUT), gradients=gradients
    )


def _last_reader(network: Network) -> dict[MapRef, int]:
    return {ref: readers[-1].number for ref, readers in network.consumers().items()}


def _kept_for_backward(network: Network) -> dict[MapRef, list[int]]:
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
