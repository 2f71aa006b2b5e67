"""The memory the suite's own float64 training iteration of a network takes, and the slices
of a batch that keep it within a bound (``--gost-reference-memory``, docs/performance.md,
"The suite's memory").

Every image's forward and backward is its own; only the weight gradients sum over the
batch. An iteration a slice of the batch at a time holds the weights and the gradients'
sums once, and one slice's maps: its memory follows from the network's table, not from B.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pytest_gostcnn.machine.pool import spans

from .executor import kept_for_backward
from .layers import NETWORK_INPUT
from .network import Network

# The default bound, in bytes: it fits a small host beside the backend's own memory. A
# network that needs more for one image (the canonical VGG-16's weights) runs an image a
# slice; a bound the user gives is never exceeded (``MemoryBoundError``).
DEFAULT_BOUND = 2 * 10**9
FLOAT64 = 8


class MemoryBoundError(ValueError):
    """A memory bound too small for one image of a network."""


@dataclass(frozen=True)
class Footprint:
    """Bytes a float64 training iteration of one network takes: ``whole`` whatever the batch
    with the batch in one slice, ``sliced`` in several (the gradients' sums besides), and
    ``per_image`` for each image of a slice."""

    whole: int
    sliced: int
    per_image: int


def footprint(network: Network, error_model: bool) -> Footprint:
    """The iteration's footprint, an upper bound by the table (``tests/test_memory.py`` holds
    it to tracemalloc's peak): each image's maps that backward reads (kept through the
    slice) and twice the widest layer's maps (its temporaries); the weights and their
    gradients, the gradients' sums where the batch is sliced, and the largest layer's
    weights six times over (a gradient's part and its temporaries, the update's).

    With the error model every array is a value and a variance, and a gradient's sum four
    arrays (``ErrorModelKernels.gradient_part``).
    """
    arrays = 2 if error_model else 1
    shapes = {NETWORK_INPUT: network.input_shape}
    for layer in network.layers:
        shapes.update(zip(layer.outputs, layer.out_shapes, strict=True))
    kept = sum(math.prod(shapes[ref]) for ref in kept_for_backward(network))
    widest = max(
        sum(map(math.prod, layer.in_shapes)) + sum(map(math.prod, layer.out_shapes))
        for layer in network.layers
    )
    sizes = [
        sum(math.prod(shape) for shape in layer.weight_shapes.values())
        for layer in network.weight_layers
    ]
    weights, largest = sum(sizes), max(sizes, default=0)
    whole = FLOAT64 * (2 * arrays * weights + 6 * arrays * largest)
    return Footprint(
        whole=whole,
        sliced=whole + FLOAT64 * (4 if error_model else 1) * weights,
        per_image=arrays * FLOAT64 * (kept + 2 * widest),
    )


def batch_slices(
    network: Network, batch: int, bound: int | None, error_model: bool, held: int = 0
) -> list[slice]:
    """The batch cut into as few slices of nearly equal size as keep the iteration and
    ``held`` bytes beside it (``results_held``) within ``bound`` bytes (None:
    ``DEFAULT_BOUND``, or an image a slice where one needs more); ``MemoryBoundError``
    naming the smallest bound that works where one image does not fit a bound given."""
    cost = footprint(network, error_model)
    given, bound = bound is not None, DEFAULT_BOUND if bound is None else bound
    if cost.whole + held + batch * cost.per_image <= bound:
        return [slice(0, batch)]
    images = (bound - held - cost.sliced) // cost.per_image
    if images < 1 and not given:
        images = 1
    if images < 1:
        least = held + cost.per_image + (cost.whole if batch == 1 else cost.sliced)
        beside = f" ({size_text(held)} of it the results held whole)" if held else ""
        raise MemoryBoundError(
            f"a memory bound of {size_text(bound)} is too small for one image of "
            f"{network.latin} at B={batch}: the smallest that works is {size_text(least)}{beside}"
        )
    return spans(batch, -(-batch // images))


def results_held(network: Network, batch: int, training: bool) -> int:
    """Bytes a network item holds whole beside the reference's iteration: the float64 values
    of the reference's output and, in training, its input residual, kept for the backend's
    to be compared with (``conformance/network.py``; their variances as their means)."""
    maps = math.prod(network.output_shape)
    if training:
        maps += math.prod(network.input_shape)
    return FLOAT64 * batch * maps


def size_text(size: int) -> str:
    """Bytes as the option spells them: ``2GB``, ``1.5GB``, ``750MB`` (rounded up)."""
    for unit, scale in (("TB", 10**12), ("GB", 10**9), ("MB", 10**6), ("KB", 10**3)):
        if size >= scale:
            return f"{math.ceil(size / scale * 100) / 100:g}{unit}"
    return f"{size}B"


def parse_size(text: str) -> int:
    """``2GB``, ``1.5GB``, ``750MB``, ``64KB`` (``TB`` too) or plain bytes; ValueError
    otherwise."""
    clean = text.strip().upper().removesuffix("B")
    scale = {"T": 10**12, "G": 10**9, "M": 10**6, "K": 10**3}.get(clean[-1:], 1)
    number = clean[:-1] if scale > 1 else clean
    try:
        value = float(number)
    except ValueError:
        raise ValueError(f"{text}: not a size; give bytes with GB, MB or KB (2GB, 750MB)") from None
    if not math.isfinite(value) or value * scale < 1:
        raise ValueError(f"{text}: give a size above 0 (2GB, 750MB)")
    return int(value * scale)
