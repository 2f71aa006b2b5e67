"""Section 8 for one network: one inference or one training iteration from section 8's
draws, every array standard.md §6 judges it by compared with the float64 reference.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from pytest_gostcnn.backend import Backend
from pytest_gostcnn.model import executor
from pytest_gostcnn.model.data import (
    DrawnBatch,
    draw_input,
    draw_out_residual,
    draw_slices,
    draw_weights,
)
from pytest_gostcnn.model.fixed_point import integer_type
from pytest_gostcnn.model.memory import results_held
from pytest_gostcnn.model.network import Network
from pytest_gostcnn.reference.library import NUMPY, ReferenceLibrary

from . import fixed_point
from .error_model import ValueAndVariance
from .harness import comparer, guarded, model_of, suite_side
from .sliced import VALUES, reference_inference, reference_training
from .verdicts import Verification


def verify_network(
    backend: Backend,
    network: Network,
    mode: str,
    batch: int,
    seed: int,
    threshold: float | None = None,
    weights: str = "scaled",
    library: ReferenceLibrary = NUMPY,
) -> Verification:
    """Section 8 for one network: ``mode`` is "inference" or "training"; ``weights`` is the
    reading of 8.2's weight draw (standard.md §6), "scaled" or "full-range"; ``library``
    the array library the float64 reference runs on (an integer type's runs on NumPy)."""
    subject = f"{network.latin}-{mode}-B{batch}"
    itype = integer_type(backend.dtype)
    if itype is not None:
        return _verify_integer(backend, network, mode, batch, seed, threshold, weights, subject)
    model, representable = model_of(backend.dtype, library)

    def prepare() -> tuple:
        # The suite's side first: the data, and the float64 reference a slice at a time
        # from slices of the draws; the results' values kept whole count in its bound.
        rng = np.random.default_rng(seed)
        host_weights = {
            n: {k: representable(a) for k, a in ws.items()}
            for n, ws in draw_weights(network, rng, weights).items()
        }
        image = draw_slices(draw_input, network, batch, rng)
        ref_weights = {
            n: {k: model.bound(a) for k, a in ws.items()} for n, ws in host_weights.items()
        }
        held = results_held(network, batch, training=mode != "inference")
        if mode == "inference":
            reference = reference_inference(network, model, ref_weights, image, held, VALUES)
            return host_weights, image, None, ref_weights, reference
        out_residual = draw_slices(draw_out_residual, network, batch, rng)
        reference = reference_training(
            network, model, ref_weights, image, out_residual, held, VALUES
        )
        return host_weights, image, out_residual, ref_weights, reference

    def handed(drawn: DrawnBatch):
        # The whole draw exists only as it is handed over, rounded as the reference read it.
        return backend.to_device(suite_side(batch, lambda: drawn.rounded(representable)))

    def verify(result: Verification) -> None:
        host_weights, image, out_residual, ref_weights, reference = suite_side(batch, prepare)
        loaded = backend.load_weights(network, host_weights)
        compare = comparer(result, backend, threshold)
        if mode == "inference":
            output = backend.infer(network, loaded, handed(image))
            backend.synchronize()
            compare("output", output, reference)
            return
        got = backend.train(network, loaded, handed(image), handed(out_residual))
        backend.synchronize()
        compare_training(compare, network, got, loaded, reference, ref_weights)

    return guarded(subject, verify)


def _verify_integer(
    backend: Backend,
    network: Network,
    mode: str,
    batch: int,
    seed: int,
    threshold: float | None,
    weights: str,
    subject: str,
) -> Verification:
    """Integer inference under the fixed-point model: the backend gets the scale table
    (``Backend.use_scales``), then the integer weights and image, and returns the output's
    integers, compared at the output's scale."""
    if mode != "inference":
        raise ValueError(
            f"{backend.dtype} verifies inference only: the standard admits integer types for "
            "inference alone (standard.md §8)"
        )
    itype = integer_type(backend.dtype)

    def prepare() -> fixed_point.IntegerNetworkData:
        rng = np.random.default_rng(seed)
        return fixed_point.prepare_network(network, batch, rng, weights, itype)

    def verify(result: Verification) -> None:
        data = suite_side(batch, prepare)
        result.scales = fixed_point.scale_record(data.scales)
        backend.use_scales(data.scales)
        loaded = backend.load_weights(network, data.weights)
        output = backend.infer(network, loaded, backend.to_device(data.image))
        backend.synchronize()
        scale = data.scales[network.layers[-1].number].outputs[0]
        comparer(result, backend, threshold)("output", output, data.reference, scale=scale)

    return guarded(subject, verify)


def compare_training(
    compare: Callable[[str, object, ValueAndVariance], None],
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
