"""The backend's own best rate, measured before a test's rounds (standard.md §7.7, fifth
release): a peak below it is false, so every result divided by it is no result.

The probe times the backend's forward kernel of the network's largest convolution at the
test's batch and data type, a few times, each call ending when its output is on the host
(as a round ends). It is untimed for the results and reported apart from them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pytest_gostcnn.backend import Backend
from pytest_gostcnn.model.fixed_point import ScaleTable, integer_type, quantise
from pytest_gostcnn.model.layers import Layer
from pytest_gostcnn.model.network import Network

PROBE_REPEATS = 3  # timed calls, after one untimed call that warms the kernel
CONVOLUTIONS = ("conv", "depthwise")


@dataclass(frozen=True)
class Probe:
    """The probe's calls: ``macs`` each (the layer's MACs per image x the batch), their
    ``seconds``; the rate is the best call's."""

    row: int
    macs: int
    seconds: tuple[float, ...]

    @property
    def macs_per_second(self) -> float:
        return self.macs / min(self.seconds)

    def as_dict(self) -> dict:
        return {
            "row": self.row,
            "macs": self.macs,
            "seconds": list(self.seconds),
            "macs_per_second": self.macs_per_second,
        }

    @classmethod
    def from_dict(cls, data: dict) -> Probe:
        """The probe ``as_dict`` wrote; its rate is recomputed."""
        return cls(data["row"], data["macs"], tuple(data["seconds"]))


def largest_convolution(network: Network) -> Layer | None:
    """The convolution (plain or depthwise) with the most MACs, the first of equals."""
    layers = [layer for layer in network.layers if layer.type.name in CONVOLUTIONS]
    return max(layers, key=lambda layer: layer.macs, default=None)


def probe(
    backend: Backend,
    network: Network,
    host_weights: dict,
    batch: int,
    scales: ScaleTable | None = None,
    repeats: int = PROBE_REPEATS,
    clock: Callable[[], float] = time.perf_counter,
) -> Probe | None:
    """Time ``backend``'s forward kernel of ``network``'s largest convolution on ``batch``
    images, with the test's ``host_weights`` of that layer handed over as a layer item's are
    (an integer type's integers, its ``scales`` already handed over): None when the network
    has no convolution."""
    layer = largest_convolution(network)
    if layer is None:
        return None
    rng = np.random.default_rng(0)
    host = rng.uniform(-1.0, 1.0, (batch, *layer.in_shapes[0])).astype(np.float32)
    itype = integer_type(backend.dtype)
    if itype is not None and scales is not None:
        host = quantise(host * 2 ** (itype.bits - 2), 1.0, itype)
    given = [backend.to_device(host)]
    weights = {k: backend.to_device(a) for k, a in host_weights[layer.number].items()}
    backend.synchronize()
    seconds = []
    for call in range(repeats + 1):
        started = clock()
        outputs = backend.forward(layer, given, weights)
        backend.synchronize()
        for output in outputs:
            backend.to_host(output)
        if call:  # the first call warms the kernel
            seconds.append(clock() - started)
    return Probe(layer.number, layer.macs * batch, tuple(seconds))
