"""Section 9: the timed rounds of one test of one network on one computing cell.

A round is one training iteration (9.3) or one forward pass (9.4) over one batch of the
cell's own images; preparing the batch is the round's untimed setup (docs/benchmarking.md).
A few rounds, drawn where the backend cannot see, are audited after they end: their results
are checked against the float64 reference outside the timed region (standard.md §7.7).
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from pytest_gostcnn.backend import Backend
from pytest_gostcnn.model.network import Network

from .cells import Deadline
from .estimate import RunEstimate, duration
from .images import ImageSet
from .timing import FULL_PROFILE_IMAGES, Audit, macs_per_image

PROFILES = ("quick", "full")
# The quick profile: enough images for a stable mean on a CPU, few enough that all six
# networks in both modes run in minutes. Its results are never compliant (9.3 wants 10^6).
QUICK_IMAGES = 16
QUICK_MIN_ROUNDS = 3
WARMUP_ROUNDS = 1
# Benchmark data are chosen to keep the iterations of W += W_D / B small and away from
# float32's subnormal numbers (which would time a CPU's slow path, not the implementation):
# weights from U(-a, a), a = sqrt(6 / fan-in), and the output residual from U(-1, 1) x
# 2^-20. Section 9 leaves both free ("any float values"); section 8's ranges are for
# verification. They do not bound every network's weights over a long run: an audited
# round whose reference outgrows the type says so (docs/benchmarking.md).
RESIDUAL_SCALE = 2.0**-20
# Audited rounds: one among the first AUDIT_WINDOW timed rounds, another among the last
# AUDIT_WINDOW, and one more anywhere between per AUDIT_EVERY rounds of a long run.
AUDIT_WINDOW = 10
AUDIT_EVERY = 10_000
# A stalled cell (docs/cells.md): with several cells, each round starts at a watched barrier,
# and a cell that has not reached it by the deadline ends the job. The rounds of a test do
# the same work as its warm-up round, so a cell that takes STALL_FACTOR times as long is
# not running; the floor leaves room for what has nothing to do with the round (a busy
# node's scheduler, paging, a collector's pause). Before the warm-up has given a rate
# (loading the weights, the warm-up round, which may compile a GPU backend's kernels) the
# deadline is the default, or --gost-stall-timeout, which sets every deadline outright.
STALL_FACTOR = 20
STALL_FLOOR_SECONDS = 60.0
STALL_DEFAULT_SECONDS = 1800.0


@dataclass(frozen=True)
class Plan:
    """The timed rounds of one test on one cell: chosen by a profile, or by an image count
    (``requested``, ``--gost-images=N``; then ``profile`` is None)."""

    profile: str | None
    rounds: int
    warmup_rounds: int
    batch: int
    requested: int | None = None

    @property
    def images(self) -> int:
        return self.rounds * self.batch

    @property
    def label(self) -> str:
        """What chose the rounds, as the labels say it: ``quick``, ``full``, ``images=N``."""
        return self.profile if self.requested is None else f"images={self.requested}"

    @property
    def meets_image_count(self) -> bool:
        """Section 9.3: 1,000,000 images per cell: the full profile, or an image count that
        asks at least that many (never one below it, whatever the rounding adds)."""
        if self.requested is not None:
            return self.requested >= FULL_PROFILE_IMAGES
        return self.profile == "full" and self.images >= FULL_PROFILE_IMAGES


def plan(profile: str, batch: int, images: int | None = None) -> Plan:
    """The rounds of a test: ceil(images / B) for an image count of at least one batch
    (which replaces the profile; ``run/resolution.py`` checks it), else the profile's."""
    if images is not None:
        return Plan(None, math.ceil(images / batch), WARMUP_ROUNDS, batch, images)
    if profile == "full":
        rounds = math.ceil(FULL_PROFILE_IMAGES / batch)
    else:
        rounds = max(QUICK_MIN_ROUNDS, math.ceil(QUICK_IMAGES / batch))
    return Plan(profile, rounds, WARMUP_ROUNDS, batch)


def stall_deadline(stall_timeout: float | None, warmup_seconds: float | None) -> Deadline:
    """How long a cell waits at a round's barrier for the others: ``--gost-stall-timeout``
    when given, else the default until the warm-up round has been timed, then
    ``STALL_FACTOR`` times it (from the barrier before it to the one after), at least
    ``STALL_FLOOR_SECONDS``."""
    if stall_timeout is not None:
        return Deadline(stall_timeout, "--gost-stall-timeout")
    if warmup_seconds is None:
        return Deadline(STALL_DEFAULT_SECONDS, "the default until the warm-up round is timed")
    return Deadline(
        max(STALL_FLOOR_SECONDS, STALL_FACTOR * warmup_seconds),
        f"{STALL_FACTOR} x the warm-up round's {warmup_seconds:.3g} s, at least "
        f"{STALL_FLOOR_SECONDS:g} s",
    )


def subject(network: Network, mode: str) -> str:
    """The test in a progress line or a stall's: ``М (M) training``."""
    return f"{network.letter} ({network.latin}) {mode}"


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


def audited_rounds(rounds: int, draw: random.Random) -> tuple[int, ...]:
    """The timed rounds (numbered from 1) to audit, in order: one among the first ten, a
    different one among the last ten, and one more per ``AUDIT_EVERY`` rounds between them.

    ``draw`` decides; the plugin gives a generator seeded by the operating system, so
    neither the backend nor the session's seed can tell which rounds are audited.
    """
    if rounds < 2:
        return tuple(range(1, rounds + 1))
    first = draw.randint(1, min(AUDIT_WINDOW, rounds))
    last = draw.choice(
        [r for r in range(max(1, rounds - AUDIT_WINDOW + 1), rounds + 1) if r != first]
    )
    between = range(AUDIT_WINDOW + 1, rounds - AUDIT_WINDOW + 1)
    more = draw.sample(between, min(rounds // AUDIT_EVERY, len(between)))
    return tuple(sorted({first, last, *more}))


@dataclass
class AuditedRound:
    """What an audit checks of one timed round: the data it was given on the host, the
    weights it started from (a host copy, taken before it), and what it gave back."""

    number: int  # the timed round, from 1
    image: np.ndarray
    out_residual: np.ndarray | None  # training only
    weights: dict  # host arrays, by row and name
    result: Any  # the backend's output map (inference) or TrainingResult (training)
    updated: dict | None  # training: the backend's weights after the round, on the device


class Rounds:
    """The setup, the timed target and the teardown of every round of one test, with
    progress reports; ``audit`` checks the rounds ``audited_rounds`` draws (with ``draw``,
    by default the operating system's randomness), after each ends, untimed. ``estimate``,
    the whole run's, hears when this test begins and when its warm-up ends.

    ``barrier(deadline, where)``, with several cells, meets the others before each round
    and after the last (``end``), giving up on a cell that is not there by ``deadline``
    (``stall_deadline``) and naming the round that cell was in (``where``)."""

    def __init__(
        self,
        backend: Backend,
        network: Network,
        mode: str,
        run_plan: Plan,
        seed: int,
        cell: int = 0,
        progress: Callable[[str], None] | None = None,
        barrier: Callable[[Deadline, str], None] | None = None,
        audit: Callable[[AuditedRound], Audit] | None = None,
        draw: random.Random | None = None,
        stall_timeout: float | None = None,
        estimate: RunEstimate | None = None,
    ) -> None:
        self.backend, self.network, self.mode, self.plan = backend, network, mode, run_plan
        rng = np.random.default_rng([seed, cell])
        self.host_weights = benchmark_weights(network, rng)
        self.weights = backend.load_weights(network, self.host_weights)
        self.images = ImageSet(network.input_shape, seed, cell)
        self.residual_rng = np.random.default_rng([seed, cell, 1])
        self.progress = progress
        self.barrier = barrier
        self.stall_timeout = stall_timeout
        self.warmup_seconds: float | None = None  # the last warm-up round, barrier to barrier
        self.left_barrier: float | None = None
        self.audit = audit
        self.audited = (
            audited_rounds(run_plan.rounds, draw or random.SystemRandom()) if audit else ()
        )
        self.audits: list[Audit] = []
        self.audit_seconds = 0.0  # copying the weights and checking: never timed
        self.error: str | None = None  # the backend's first failure; later rounds idle
        self.first_image = ""
        self.next_image = 0
        self.calls = 0  # rounds set up so far, warm-up included
        self.number = 0  # the timed round now set up or running (0: the warm-up)
        self.done = 0  # timed rounds that ended
        self.pending: AuditedRound | None = None  # the round now running, if audited
        self.result: Any = None
        self.estimate = estimate
        self.started = time.monotonic()
        self.last_report = self.started

    @property
    def audit_failed(self) -> bool:
        return any(not audit.passed for audit in self.audits)

    # The batch is generated, moved to the device and its residual filled in the setup,
    # outside the timed region: the standard times the computation on a cell's image set
    # (which a system would stream from storage), not the project's generator.
    def setup(self) -> tuple[tuple, dict]:
        batch = self.plan.batch
        self.calls += 1
        self._estimate()
        number = self.calls - self.plan.warmup_rounds
        self.number = max(0, number)
        arguments: tuple = (None,)
        try:
            if self.error is None:
                arguments = self._arguments(batch, number)
        except Exception as exc:  # noted; this cell still meets the others at the barrier
            self.error = _failure(exc, "preparing a batch")
        self.next_image += batch
        self._report()
        if self.barrier is not None:  # every cell's round starts together
            ended = self.calls - 1
            self._meet(self._round_name(ended) if ended else f"preparing {self._round_name(1)}")
        return arguments, {}

    def end(self) -> None:
        """After the last round: every cell meets the others once more (with a barrier)."""
        if self.barrier is not None:
            self._meet(self._round_name(self.calls))

    @property
    def deadline(self) -> Deadline:
        return stall_deadline(self.stall_timeout, self.warmup_seconds)

    def _meet(self, ended: str) -> None:
        self.barrier(self.deadline, ended)
        now = time.monotonic()
        if self.calls == self.plan.warmup_rounds + 1 and self.left_barrier is not None:
            self.warmup_seconds = now - self.left_barrier  # the slowest cell's, as all wait
        self.left_barrier = now

    def _round_name(self, call: int) -> str:
        """The round ``setup`` was called for the ``call``-th time (from 1)."""
        if call <= self.plan.warmup_rounds:
            return "the warm-up round"
        return f"timed round {call - self.plan.warmup_rounds} of {self.plan.rounds}"

    def _estimate(self) -> None:
        """Tell the run's estimate that this test began, or that its warm-up rounds ended
        (the first timed round is being set up), and print the total it then gives."""
        if self.estimate is None:
            return
        key = (self.network.latin, self.mode)
        if self.calls == 1:
            self.estimate.began(key)
        if self.calls == self.plan.warmup_rounds + 1:
            images = self.plan.warmup_rounds * self.plan.batch
            line = self.estimate.warmed_up(key, macs_per_image(self.network, self.mode) * images)
            if line is not None and self.progress is not None:
                self.progress(line)

    def _arguments(self, batch: int, number: int) -> tuple:
        host = self.images.batch(self.next_image, batch)
        if self.next_image == self.plan.warmup_rounds * batch:
            self.first_image = f"{zlib.crc32(host[0].tobytes()):08x}"
        residual = None
        if self.mode == "training":
            shape = (batch, *self.network.output_shape)
            residual = self.residual_rng.uniform(-1.0, 1.0, size=shape) * RESIDUAL_SCALE
        if number in self.audited and not self.audit_failed:
            started = time.monotonic()
            self.pending = AuditedRound(number, host, residual, self._weights_now(), None, None)
            self.audit_seconds += time.monotonic() - started
        image = self.backend.to_device(host)
        if residual is None:
            return (image,)
        return (image, self.backend.to_device(residual))

    def _weights_now(self) -> dict:
        """The weights this round starts from, on the host: training changes them every
        round, so they are copied back from the device; inference keeps the drawn ones."""
        if self.mode == "inference":
            return self.host_weights
        return {
            number: {name: np.array(self.backend.to_host(a)) for name, a in arrays.items()}
            for number, arrays in self.weights.items()
        }

    def target(self, image, residual=None) -> None:
        if self.error is not None or self.audit_failed:
            return
        try:
            if residual is None:
                self.result = self.backend.infer(self.network, self.weights, image)
            else:
                self.result = self.backend.train(self.network, self.weights, image, residual)
            self.backend.synchronize()
        except Exception as exc:  # noted and reported for every cell after the rounds
            self.error = _failure(exc, f"{self.mode} round")

    def teardown(self, *arguments) -> None:
        """After a round, untimed: audit it if it was drawn, then let its results go."""
        pending, result = self.pending, self.result
        self.pending = self.result = None
        if self.error is None and not self.audit_failed:  # the round ran
            self.done = self.number  # counted here, not in the timed target
        if pending is None or self.error is not None:
            return
        started = time.monotonic()
        updated = self.weights if self.mode == "training" else None
        audit = self.audit(dataclasses.replace(pending, result=result, updated=updated))
        seconds = time.monotonic() - started
        self.audit_seconds += seconds
        self.audits.append(dataclasses.replace(audit, seconds=seconds))

    def _report(self, every: float = 10.0) -> None:
        now = time.monotonic()
        if self.progress is None or now - self.last_report < every:
            return
        self.last_report = now
        total = (self.plan.rounds + self.plan.warmup_rounds) * self.plan.batch
        done = self.next_image
        rate = done / (now - self.started)
        left = (total - done) / rate if rate > 0 else math.inf
        line = (
            f"{subject(self.network, self.mode)}: {done}/{total} images "
            f"({100 * done / total:.1f}%), {rate:.3g} images/s, about {duration(left)} left"
        )
        if self.estimate is not None:
            line += "; " + self.estimate.status((self.network.latin, self.mode), done / total)
        self.progress(line)


def _failure(exc: Exception, during: str) -> str:
    return f"the backend raised {type(exc).__name__}: {exc} ({during})"
