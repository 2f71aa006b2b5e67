"""The check an array library passes before the run relies on it for the float64 reference
(standard.md §6, "Where the reference runs"): the reference and its error model on the
library against NumPy's, array by array, on fixed items.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from pytest_gostcnn.model import executor
from pytest_gostcnn.model.data import draw_input, draw_out_residual, draw_weights
from pytest_gostcnn.model.table_files import load_networks
from pytest_gostcnn.reference.library import NUMPY, LibraryError, ReferenceLibrary, to_numpy

from .error_model import ValueAndVariance
from .harness import model_of
from .layer import STEPS, layer_steps, prepare_layer
from .layer_cases import layer_cases

# Each array may differ from NumPy's by this share of its scale (its largest |value|):
# float64 rounding summed in another order stays near 1e-15; a wrong kernel is far above.
TOLERANCE = 1e-12
# The fixed items: every small layer case through its last step, and one training
# iteration of the shipped Ш (Sh) at B=1, in float32's error model, from seed 0.
CHECK_DTYPE, CHECK_NETWORK, CHECK_BATCH, CHECK_SEED = "float32", "Sh", 1, 0


@dataclass(frozen=True)
class Agreement:
    """How far a library's reference lies from NumPy's on the fixed items."""

    items: int
    arrays: int
    max_relative_difference: float
    worst: str  # the array where it is largest
    tolerance: float = TOLERANCE

    @property
    def agrees(self) -> bool:
        return self.max_relative_difference <= self.tolerance

    def as_dict(self) -> dict:
        return {
            "items": self.items,
            "arrays": self.arrays,
            "max_relative_difference": self.max_relative_difference,
            "worst_array": self.worst,
            "tolerance": self.tolerance,
        }


def relative_difference(expected: np.ndarray, got: np.ndarray) -> float:
    """max |got - expected| over the scale max |expected|; inf for another shape or a NaN."""
    if expected.shape != got.shape:
        return float("inf")
    difference = float(np.max(np.abs(got - expected), initial=0.0))
    if not np.isfinite(difference):
        return float("inf")
    scale = float(np.max(np.abs(expected), initial=0.0))
    return difference / scale if scale > 0 else (0.0 if difference == 0 else float("inf"))


def _arrays(name: str, tree: Any) -> Iterator[tuple[str, Any]]:
    """(name, array) for the value and the variance of every ``ValueAndVariance`` in ``tree``."""
    if isinstance(tree, ValueAndVariance):
        yield f"{name} value", tree.value
        yield f"{name} variance", tree.var
    elif isinstance(tree, dict):
        for key, item in tree.items():
            yield from _arrays(f"{name} {key}", item)
    else:  # a step's maps
        for i, item in enumerate(tree):
            yield from _arrays(f"{name} {i + 1}", item)


def _layer_items(library: ReferenceLibrary) -> Iterator[tuple[str, Any]]:
    for case in layer_cases():
        last = layer_steps(case.layer)[-1]
        for on in (NUMPY, library):
            data = prepare_layer(case.layer, last, CHECK_BATCH, CHECK_SEED, CHECK_DTYPE, library=on)
            steps = {step: data.reference[step] for step in STEPS[: STEPS.index(last) + 1]}
            yield f"{case.layer.type.name} {case.tag}", steps


def _network_item(library: ReferenceLibrary) -> Iterator[tuple[str, Any]]:
    network = load_networks()[CHECK_NETWORK]
    for on in (NUMPY, library):
        model, representable = model_of(CHECK_DTYPE, on)
        rng = np.random.default_rng(CHECK_SEED)
        weights = {
            n: {k: model.bound(representable(a)) for k, a in ws.items()}
            for n, ws in draw_weights(network, rng, "scaled").items()
        }
        image = model.bound(representable(draw_input(network, CHECK_BATCH, rng)))
        residual = model.bound(representable(draw_out_residual(network, CHECK_BATCH, rng)))
        result = executor.train(network, model, weights, image, residual)
        arrays = {
            "output": result.output,
            "input residual": result.input_residual,
            "gradient": {f"row {n}": grads for n, grads in result.gradients.items()},
            "updated": {f"row {n}": ws for n, ws in weights.items()},
        }
        yield f"{CHECK_NETWORK} training B={CHECK_BATCH}", arrays


def agreement(library: ReferenceLibrary) -> Agreement:
    """The reference on ``library`` against NumPy's on the fixed items, every value and
    variance array of every step; ``LibraryError`` when the library cannot run."""
    library.native_device  # noqa: B018 (not installed, or no such device: one line, first)
    items = arrays = 0
    worst, largest = "", 0.0
    produced = iter([*_layer_items(library), *_network_item(library)])
    for (name, expected), (_, got) in zip(produced, produced, strict=True):
        items += 1
        pairs = zip(_arrays(name, expected), _arrays(name, got), strict=True)
        for (array, want), (_, have) in pairs:
            arrays += 1
            difference = relative_difference(to_numpy(want), to_numpy(have))
            if difference > largest or not worst:
                worst, largest = array, difference
    return Agreement(items, arrays, largest, worst)


def checked(library: ReferenceLibrary) -> Agreement | None:
    """``library``'s agreement with NumPy (None for NumPy, the reference itself); a
    ``LibraryError`` in one line when it cannot run or disagrees."""
    if library.is_numpy:
        return None
    found = agreement(library)
    if not found.agrees:
        raise LibraryError(
            f"the reference library {library.name} on {library.device} disagrees with "
            f"NumPy's float64: {found.max_relative_difference:.3g} of the array's scale at "
            f"{found.worst} (tolerance {found.tolerance:g}); nothing is judged by an "
            "unchecked reference"
        )
    return found
