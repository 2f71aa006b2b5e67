"""Section 9: the timed rounds of one test of one network on one computing cell.

A round is one training iteration (9.3) or one forward pass (9.4) over one batch of the
cell's own images; preparing the batch is the round's untimed setup (docs/benchmarking.md).
"""

from __future__ import annotations

import math
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pytest_gostcnn.backend import Backend
from pytest_gostcnn.model.network import Network

from .images import ImageSet
from .timing import FULL_PROFILE_IMAGES

PROFILES = ("quick", "full")
# The quick profile: enough images for a stable mean on a CPU, few enough that all six
# networks in both modes run in minutes. Its results are never compliant (9.3 wants 10^6).
QUICK_IMAGES = 16
QUICK_MIN_ROUNDS = 3
WARMUP_ROUNDS = 1
# Benchmark data keep a million iterations of W += W_D / B finite and away from subnormal
# numbers (which would time a CPU's slow path, not the implementation): weights from
# U(-a, a), a = sqrt(6 / fan-in), and the output residual from U(-1, 1) x 2^-20. Section 9
# leaves both free ("any float values"); section 8's ranges are for verification.
RESIDUAL_SCALE = 2.0**-20


@dataclass(frozen=True)
class Plan:
    profile: str
    rounds: int
    warmup_rounds: int
    batch: int

    @property
    def images(self) -> int:
        return self.rounds * self.batch

    @property
    def compliant(self) -> bool:
        """Section 9.3: 1,000,000 images per cell. Only the full profile does that."""
        return self.profile == "full" and self.images >= FULL_PROFILE_IMAGES


def plan(profile: str, batch: int) -> Plan:
    if profile == "full":
        rounds = math.ceil(FULL_PROFILE_IMAGES / batch)
    else:
        rounds = max(QUICK_MIN_ROUNDS, math.ceil(QUICK_IMAGES / batch))
    return Plan(profile, rounds, WARMUP_ROUNDS, batch)


def benchmark_weights(network: Network, rng: np.random.Generator) -> dict:
    """Weights from U(-a, a), a = sqrt(6 / fan-in): activations keep their scale."""
    weights = {}
    for layer in network.weight_layers:
        bound = math.sqrt(6.0 / layer.fan_in)
        weights[layer.number] = {
            name: rng.uniform(-bound, bound, size=shape)
            for name, shape in layer.weight_shapes.items()
        }
    return weights


class Rounds:
    """The setup and the timed target of every round of one test, with progress reports."""

    def __init__(
        self,
        backend: Backend,
        network: Network,
        mode: str,
        run_plan: Plan,
        seed: int,
        cell: int = 0,
        progress: Callable[[str], None] | None = None,
        before_round: Callable[[], None] | None = None,
    ) -> None:
        self.backend, self.network, self.mode, self.plan = backend, network, mode, run_plan
        rng = np.random.default_rng([seed, cell])
        self.weights = backend.load_weights(network, benchmark_weights(network, rng))
        self.images = ImageSet(network.input_shape, seed, cell)
        self.residual_rng = np.random.default_rng([seed, cell, 1])
        self.progress = progress
        self.before_round = before_round
        self.error: str | None = None  # the backend's first failure; later rounds idle
        self.first_image = ""
        self.next_image = 0
        self.started = time.monotonic()
        self.last_report = self.started

    # The batch is generated, moved to the device and its residual filled in the setup,
    # outside the timed region: the standard times the computation on a cell's image set
    # (which a system would stream from storage), not the project's generator.
    def setup(self) -> tuple[tuple, dict]:
        batch = self.plan.batch
        arguments: tuple = (None,)
        try:
            if self.error is None:
                arguments = self._arguments(batch)
        except Exception as exc:  # noted; this cell still meets the others at the barrier
            self.error = _failure(exc, "preparing a batch")
        self.next_image += batch
        self._report()
        if self.before_round is not None:
            self.before_round()  # e.g. a barrier: every cell's round starts together
        return arguments, {}

    def _arguments(self, batch: int) -> tuple:
        host = self.images.batch(self.next_image, batch)
        if self.next_image == self.plan.warmup_rounds * batch:
            self.first_image = f"{zlib.crc32(host[0].tobytes()):08x}"
        image = self.backend.to_device(host)
        if self.mode == "inference":
            return (image,)
        shape = (batch, *self.network.output_shape)
        residual = self.residual_rng.uniform(-1.0, 1.0, size=shape) * RESIDUAL_SCALE
        return (image, self.backend.to_device(residual))

    def target(self, image, residual=None) -> None:
        if self.error is not None:
            return
        try:
            if residual is None:
                self.backend.infer(self.network, self.weights, image)
            else:
                self.backend.train(self.network, self.weights, image, residual)
            self.backend.synchronize()
        except Exception as exc:  # noted and reported for every cell after the rounds
            self.error = _failure(exc, f"{self.mode} round")

    def _report(self, every: float = 10.0) -> None:
        now = time.monotonic()
        if self.progress is None or now - self.last_report < every:
            return
        self.last_report = now
        total = (self.plan.rounds + self.plan.warmup_rounds) * self.plan.batch
        done = self.next_image
        rate = done / (now - self.started)
        left = (total - done) / rate if rate > 0 else math.inf
        self.progress(
            f"{self.network.letter} ({self.network.latin}) {self.mode}: {done}/{total} images "
            f"({100 * done / total:.1f}%), {rate:.3g} images/s, about {_duration(left)} left"
        )


def _failure(exc: Exception, during: str) -> str:
    return f"the backend raised {type(exc).__name__}: {exc} ({during})"


def _duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "unknown time"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
