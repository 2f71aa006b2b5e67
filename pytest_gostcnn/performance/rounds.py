"""Section 9: the timed rounds of one test of one network on one computing cell.

A round is one training iteration (9.3) or one forward pass (9.4) over one batch of the
cell's own images; preparing the batch is the round's untimed setup (docs/benchmarking.md).
A round ends when its results are on the host: the timed region reads them back. Training
runs in segments of ``SEGMENT_ROUNDS`` rounds, each from the drawn weights. A few rounds,
drawn where the backend cannot see, are audited after they end: their results are checked
against the float64 reference, replayed from the segment's start (standard.md §7.7).
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from pytest_gostcnn.backend import Backend
from pytest_gostcnn.model import executor
from pytest_gostcnn.model.fixed_point import ScaleTable, integer_type, quantise
from pytest_gostcnn.model.network import Network

from .audit_draw import audited_after, audited_rounds
from .cells import Deadline
from .contention import ContentionMeter
from .estimate import RunEstimate, duration
from .images import ImageSet, ResidualSet
from .partial import PartialCell, boundary_rounds
from .timing import FULL_PROFILE_IMAGES, Audit, macs_per_image

PROFILES = ("quick", "full")
# The quick profile: enough images for a stable mean on a CPU, few enough that all six
# networks in both modes run in minutes. Its results are never compliant (9.3 wants 10^6).
QUICK_IMAGES = 16
QUICK_MIN_ROUNDS = 3
WARMUP_ROUNDS = 1
# Section 9's training data (standard.md §7.8): weights from U(-a, a), a = sqrt(6 / fan-in),
# and the output residual from U(-1, 1) x the type's scale. The update has no learning rate,
# so weights grow over rounds on random data: training sets them back to the drawn values
# every segment of SEGMENT_ROUNDS rounds. float32: 2^-28 keeps every value of a 16-round
# segment in range and far above the subnormals, with updates large enough to see. float16
# (float32 masters): its backward residuals are normal only from about 2^-5, where one update
# already moves the weights by more than their size, so every round is a segment of its own.
RESIDUAL_SCALE = 2.0**-28
SEGMENT_ROUNDS = 16
TRAINING_DATA = {"float32": (SEGMENT_ROUNDS, RESIDUAL_SCALE), "float16": (1, 2.0**-2)}


def training_data(dtype: str) -> tuple[int, float]:
    """(rounds per segment, output residual scale) of a training test in ``dtype``."""
    return TRAINING_DATA.get(dtype, TRAINING_DATA["float32"])


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


def image_checksum(image: np.ndarray) -> str:
    """The checksum a report keeps of a cell's first timed image (cells must differ)."""
    return f"{zlib.crc32(image.tobytes()):08x}"


def segment_start(number: int, segment_rounds: int) -> int:
    """The first timed round (from 1) of the segment timed round ``number`` lies in."""
    return number - (number - 1) % segment_rounds


# An integer type's calibration: (network, drawn weights, first images) -> (integer weights,
# scales); the plugin passes conformance.fixed_point's.
Calibrate = Callable[[Network, dict, np.ndarray], tuple[dict, ScaleTable]]


@dataclass
class AuditedRound:
    """What an audit checks of one timed round, rebuilt on the host after it ended: the data
    it was given (regenerated), the weights its segment started from, the data of the
    segment's rounds before it (training: the audit replays them), and what it gave back."""

    number: int  # the timed round, from 1
    image: np.ndarray
    out_residual: np.ndarray | None  # training only
    weights: dict  # the drawn host arrays, by row and name
    result: Any  # the backend's output map (inference) or TrainingResult (training)
    updated: dict | None  # training: the backend's weights after the round, on the device
    # Training: (image, residual) of each earlier round of the segment, made as read.
    earlier: Iterable[tuple[np.ndarray, np.ndarray]] = ()
    replayed: int = 0  # how many rounds ``earlier`` holds
    scales: ScaleTable | None = None  # an integer type's calibrated scales


class Rounds:
    """The setup, the timed target and the teardown of every round of one test, with
    progress reports; ``audit`` checks the rounds ``audited_rounds`` draws (with ``draw``,
    by default the operating system's randomness), after each ends, untimed. ``estimate``,
    the whole run's, hears when this test begins and when its warm-up ends.

    ``barrier(deadline, where)``, with several cells, meets the others before each round
    and after the last (``end``), giving up on a cell that is not there by ``deadline``
    (``stall_deadline``) and naming the round that cell was in (``where``).

    An integer type's test (inference only) needs ``calibrate(network, weights, images)``:
    the integer weights and the scales, fixed from the drawn weights and the first batch.

    Training: the warm-up rounds start from the weights loaded with the test and form a
    segment of their own; timed round n starts a segment when (n - 1) is a multiple of
    ``segment_rounds``, and its setup loads the drawn weights again, audited or not.

    ``meter`` counts what the cell's cores did from the end of each timed round's setup to
    the start of its teardown (``performance/contention.py``): whether the cell was shared;
    a resumed test's counts go on from its checkpoint's.

    ``resume``: this cell's share of the test stopped at a boundary (``PartialCell``); the
    timed rounds go on from the next, after this run's own warm-up, the audits done kept
    and the rest drawn given them (``audited_after``). ``boundary(rounds)`` is told, in the
    teardown of each boundary's round (``partial.boundary_rounds``) but the test's last,
    untimed, that a checkpoint may be written (the plugin decides whether)."""

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
        segment_rounds: int | None = None,
        resume: PartialCell | None = None,
        boundary: Callable[[Rounds], None] | None = None,
        calibrate: Calibrate | None = None,
    ) -> None:
        default_rounds, self.residual_scale = training_data(backend.dtype)
        segment_rounds = default_rounds if segment_rounds is None else segment_rounds
        if segment_rounds < 1:
            raise ValueError(f"segment_rounds {segment_rounds}: a segment has at least 1 round")
        self.backend, self.network, self.mode, self.plan = backend, network, mode, run_plan
        rng = np.random.default_rng([seed, cell])
        self.host_weights = benchmark_weights(network, rng)
        self.images = ImageSet(network.input_shape, seed, cell)
        # An integer type: weights and scales calibrated once on the first batch of images
        # (docs/benchmarking.md), handed over before the weights and before every round.
        self.itype = integer_type(backend.dtype)
        self.scales: ScaleTable | None = None
        if self.itype is not None:
            if mode != "inference":
                raise ValueError(f"{backend.dtype} is timed in inference only")
            if calibrate is None:
                raise ValueError(f"a {backend.dtype} benchmark needs its calibration (calibrate)")
            first_batch = self.images.batch(0, run_plan.batch)
            self.host_weights, self.scales = calibrate(network, self.host_weights, first_batch)
            backend.use_scales(self.scales)
        self.weights = backend.load_weights(network, self.host_weights)
        self.residuals = ResidualSet(seed, cell, self.residual_scale)
        self.segment_rounds = segment_rounds
        self.progress = progress
        self.barrier = barrier
        self.stall_timeout = stall_timeout
        self.warmup_seconds: float | None = None  # the last warm-up round, barrier to barrier
        self.left_barrier: float | None = None
        self.audit = audit
        self.boundary = boundary
        self.boundary_rounds = boundary_rounds(mode, segment_rounds)
        # Timed rounds a stopped run did (resumed), their seconds, audits and checks' time.
        self.start = 0 if resume is None else len(resume.round_seconds)
        self.earlier_seconds = () if resume is None else resume.round_seconds
        self.audits: list[Audit] = [] if resume is None else list(resume.audits)
        self.audit_seconds = 0.0 if resume is None else resume.audit_seconds
        self.audit_before_barrier: float | None = None  # the audit since the last barrier
        if self.start and (self.start % self.boundary_rounds or self.start >= run_plan.rounds):
            raise ValueError(
                f"resumed after timed round {self.start} of {run_plan.rounds}: not a boundary "
                f"(every {self.boundary_rounds} rounds) before the test's end"
            )
        draw = draw or random.SystemRandom()
        if not audit:
            self.audited: tuple[int, ...] = ()
        elif resume is None:
            self.audited = audited_rounds(run_plan.rounds, draw)
        elif self.audit_failed:  # the stopped run's audit failed: no round is audited again
            self.audited = tuple(a.round for a in self.audits)
        else:
            past = tuple(a.round for a in self.audits)
            self.audited = past + audited_after(run_plan.rounds, self.start, past, draw)
        self.error: str | None = None  # the backend's first failure; later rounds idle
        self.first_image = ""
        if resume is not None:
            self.first_image = image_checksum(self._image(1)[0])
        self.next_image = self.start * run_plan.batch  # images set up, with the resumed ones
        self.calls = 0  # rounds set up so far, warm-up included
        self.number = 0  # the timed round now set up or running (0: the warm-up)
        self.segment_end = False  # whether that round is its segment's last (set up untimed)
        self.done = self.start  # timed rounds that ended
        self.pending: int | None = None  # the timed round now running, if audited
        self.result: Any = None
        self.estimate = estimate
        # A resumed test's counts go on from its stopped run's, over the same rounds as its
        # times (unknown when its checkpoint predates them).
        self.meter = ContentionMeter(
            earlier=None if resume is None else resume.contention,
            counted=resume is None or resume.contention is not None,
        )
        self.started = time.monotonic()
        self.last_report = self.started

    @property
    def audit_failed(self) -> bool:
        return any(not audit.passed for audit in self.audits)

    @property
    def data_rules(self) -> dict:
        """What the report states of the benchmark's training data: the segment length and
        the output residual's scale (None for inference, which has neither)."""
        training = self.mode == "training"
        return {
            "segment_rounds": self.segment_rounds if training else None,
            "residual_scale": self.residual_scale if training else None,
        }

    def ends_segment(self, number: int) -> bool:
        """Timed round ``number`` (0 or less: a warm-up round) is the last of its segment:
        the segment's length is reached, or the test's rounds, or the warm-up's."""
        if number <= 0:
            return number == 0
        return number % self.segment_rounds == 0 or number == self.plan.rounds

    # The batch is generated, moved to the device and its residual filled in the setup,
    # outside the timed region: the standard times the computation on a cell's image set
    # (which a system would stream from storage), not the project's generator. So is the
    # reload of the drawn weights at a segment's start.
    def setup(self) -> tuple[tuple, dict]:
        batch = self.plan.batch
        self.calls += 1
        self._estimate()
        number = self.calls - self.plan.warmup_rounds
        if number > 0:
            number += self.start  # a resumed test's rounds go on from the stopped run's
        self.number = max(0, number)
        self.segment_end = self.ends_segment(number)
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
        if number >= 1:
            self.meter.start()  # the last thing before the timed region
        return arguments, {}

    def end(self) -> None:
        """After the last round: every cell meets the others once more (with a barrier)."""
        if self.barrier is not None:
            self._meet(self._round_name(self.calls))

    @property
    def deadline(self) -> Deadline:
        """``stall_deadline``; after an audited round, plus ``STALL_FACTOR`` times this cell's
        audit of it: every cell audits the same rounds (the plugin gives every cell one
        draw), and a replay from the segment's start can outlast many rounds."""
        deadline = stall_deadline(self.stall_timeout, self.warmup_seconds)
        if self.audit_before_barrier is None or self.stall_timeout is not None:
            return deadline
        return Deadline(
            deadline.seconds + STALL_FACTOR * self.audit_before_barrier,
            f"{deadline.source}, plus {STALL_FACTOR} x this cell's "
            f"{self.audit_before_barrier:.3g} s audit of the round",
        )

    def _meet(self, ended: str) -> None:
        self.barrier(self.deadline, ended)
        self.audit_before_barrier = None
        now = time.monotonic()
        if self.calls == self.plan.warmup_rounds + 1 and self.left_barrier is not None:
            self.warmup_seconds = now - self.left_barrier  # the slowest cell's, as all wait
        self.left_barrier = now

    def _round_name(self, call: int) -> str:
        """The round ``setup`` was called for the ``call``-th time (from 1)."""
        if call <= self.plan.warmup_rounds:
            return "the warm-up round"
        return f"timed round {call - self.plan.warmup_rounds + self.start} of {self.plan.rounds}"

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

    def _image(self, number: int) -> np.ndarray:
        """The host images of timed round ``number`` (0 or less: a warm-up round)."""
        batch = self.plan.batch
        return self.images.batch((number + self.plan.warmup_rounds - 1) * batch, batch)

    def _residual(self, number: int) -> np.ndarray:
        """The output residual of timed round ``number``, from (seed, cell, round) alone:
        the rounds of the run are numbered from 0, the first warm-up round."""
        shape = (self.plan.batch, *self.network.output_shape)
        return self.residuals.batch(number + self.plan.warmup_rounds - 1, shape)

    def _arguments(self, batch: int, number: int) -> tuple:
        host = self._image(number)
        if number == 1:
            self.first_image = image_checksum(host[0])
        # Nothing said to the backend depends on the draw: an audited round's data and
        # starting weights are rebuilt after it ends, on the host.
        if number in self.audited and not self.audit_failed:
            self.pending = number
        if self.scales is not None:  # the integers of the images, at the input's scale
            self.backend.use_scales(self.scales)
            first = self.scales[self.network.layers[0].number].inputs[0]
            host = quantise(host, first, self.itype)
        if self.mode == "inference":
            arguments: tuple = (self.backend.to_device(host),)
        else:
            if number >= 1 and (number - 1) % self.segment_rounds == 0:
                self.weights = self.backend.load_weights(self.network, self.host_weights)
            residual = self.backend.to_device(self._residual(number))
            arguments = (self.backend.to_device(host), residual)
        self.backend.synchronize()  # the setup's copies end before the timed region begins
        return arguments

    def target(self, image, residual=None) -> None:
        """The timed region: the round's call, ``synchronize()``, and the reads that deliver
        its results to the host (``deliver``)."""
        if self.error is not None or self.audit_failed:
            return
        try:
            if residual is None:
                self.result = self.backend.infer(self.network, self.weights, image)
                self.backend.synchronize()
                deliver(self.backend, [self.result])
            else:
                self.result = self.backend.train(self.network, self.weights, image, residual)
                self.backend.synchronize()
                deliver(self.backend, delivered(self.result, self.weights, self.segment_end))
        except Exception as exc:  # noted and reported for every cell after the rounds
            self.error = _failure(exc, f"{self.mode} round")

    def teardown(self, *arguments) -> None:
        """After a round, untimed: audit it if it was drawn, then let its results go."""
        self.meter.stop()  # the first thing after the timed region
        pending, result = self.pending, self.result
        self.pending = self.result = None
        if self.error is None and not self.audit_failed:  # the round ran
            self.done = self.number  # counted here, not in the timed target
        if pending is not None and self.error is None:
            started = time.monotonic()
            audited = self._rebuilt(pending, result)
            audit = self.audit(audited)
            seconds = time.monotonic() - started
            self.audit_seconds += seconds
            self.audit_before_barrier = seconds
            self.audits.append(dataclasses.replace(audit, seconds=seconds))
        if self.boundary is not None and self.at_boundary:
            self.boundary(self)

    @property
    def at_boundary(self) -> bool:
        """The timed round just ended is a boundary's (``partial.boundary_rounds``) and not
        the test's last: the same on every cell, whatever this one's backend did (the
        checkpoint is a collective call; it keeps nothing when a cell's backend failed)."""
        return 0 < self.number < self.plan.rounds and self.number % self.boundary_rounds == 0

    def partial(self, round_seconds: Iterable[float], cell: int, device: str) -> PartialCell:
        """This cell's share of the test at the boundary just passed: ``round_seconds``,
        this run's timed rounds' seconds (the stopped run's, when resumed, come first)."""
        seconds = (*self.earlier_seconds, *round_seconds)
        if len(seconds) != self.number:
            raise ValueError(f"{len(seconds)} round times after timed round {self.number}")
        return PartialCell(
            cell,
            device,
            seconds,
            self.first_image,
            tuple(self.audits),
            self.audit_seconds,
            self.meter.contention(),
        )

    def _rebuilt(self, number: int, result: Any) -> AuditedRound:
        """Timed round ``number`` as its audit sees it: its images and residual regenerated,
        the drawn weights and, training, the data of its segment's earlier rounds."""
        image = self._image(number)
        if self.mode == "inference":
            return AuditedRound(
                number, image, None, self.host_weights, result, None, scales=self.scales
            )
        start = segment_start(number, self.segment_rounds)
        earlier = ((self._image(n), self._residual(n)) for n in range(start, number))
        return AuditedRound(
            number,
            image,
            self._residual(number),
            self.host_weights,
            result,
            self.weights,
            earlier,
            replayed=number - start,
        )

    def _report(self, every: float = 10.0) -> None:
        now = time.monotonic()
        if self.progress is None or now - self.last_report < every:
            return
        self.last_report = now
        total = (self.plan.rounds + self.plan.warmup_rounds) * self.plan.batch
        done = self.next_image  # a resumed test's include the stopped run's
        rate = (done - self.start * self.plan.batch) / (now - self.started)
        left = (total - done) / rate if rate > 0 else math.inf
        line = (
            f"{subject(self.network, self.mode)}: {done}/{total} images "
            f"({100 * done / total:.1f}%), {rate:.3g} images/s, about {duration(left)} left"
        )
        if self.estimate is not None:
            kept = self.start * self.plan.batch  # the estimate counts this run's rounds
            key = (self.network.latin, self.mode)
            line += "; " + self.estimate.status(key, (done - kept) / (total - kept))
        self.progress(line)


def delivered(result: executor.TrainingResult, weights: dict, segment_end: bool) -> list:
    """What a training round delivers: its output map, and at a segment's last round every
    updated weight array and the input residual, which force the segment's backward,
    gradient and update steps (each round's forward reads the update before it)."""
    if not segment_end:
        return [result.output]
    arrays = [a for ws in weights.values() for a in ws.values()]
    return [result.output, *arrays, result.input_residual]


def deliver(backend: Backend, arrays: list) -> None:
    """Read a round's results back to the host, inside the timed region: a round ends when
    its results are delivered (standard.md §7, third release), so work a backend left
    queued or lazy is done, and timed, here (inference: the output map)."""
    for array in arrays:
        np.asarray(backend.to_host(array))


def _failure(exc: Exception, during: str) -> str:
    return f"the backend raised {type(exc).__name__}: {exc} ({during})"
