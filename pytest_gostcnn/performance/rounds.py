"""Section 9: the timed rounds of one test of one network on one computing cell.

A round is one training iteration (9.3) or one forward pass (9.4) over one batch of the
cell's own images; preparing the batch is the round's untimed setup (docs/benchmarking.md).
A round ends when its results are on the host: the timed region reads them back and
copies them (``delivery.py``). Training runs in segments (``training_data.py``), each from
the drawn weights. After each round has delivered, whether it is audited is drawn
(``audit_draw.py``); an audited round's delivered copies are checked against the float64
reference, replayed from the segment's start (standard.md §7.7).
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from pytest_gostcnn.backend import Backend
from pytest_gostcnn.model.fixed_point import ScaleTable, integer_type, quantise
from pytest_gostcnn.model.network import Network

from .audit_draw import AuditDraw, impossible_draw
from .cells import Deadline
from .contention import ContentionMeter
from .delivery import deliver, delivered, delivery_problem, fingerprint, received
from .estimate import RunEstimate, duration
from .images import ImageSet, ResidualSet, image_checksum
from .partial import PartialCell, boundary_rounds
from .plan import Plan
from .stall import stall_deadline
from .timing import Audit, macs_per_image
from .training_data import benchmark_weights, segment_start, training_data


def subject(network: Network, mode: str) -> str:
    """The test in a progress line or a stall's: ``М (M) training``."""
    return f"{network.letter} ({network.latin}) {mode}"


# An integer type's calibration: (network, drawn weights, first images) -> (integer weights,
# scales); the plugin passes conformance.fixed_point's.
Calibrate = Callable[[Network, dict, np.ndarray], tuple[dict, ScaleTable]]


@dataclass(frozen=True)
class TimedTest:
    """What one test times on one cell: ``network`` in ``mode`` on ``backend``, the rounds of
    ``plan``, on the data of (``seed``, ``cell``).

    Args:
        segment_rounds: training's rounds per segment; None: ``training_data``'s for the
            backend's type.
        calibrate: an integer type's (inference only): the integer weights and the scales,
            fixed from the drawn weights and the first batch.
    """

    backend: Backend
    network: Network
    mode: str
    plan: Plan
    seed: int
    cell: int = 0
    segment_rounds: int | None = None
    calibrate: Calibrate | None = None


@dataclass(frozen=True)
class Links:
    """How one test's rounds reach the rest of the session; each may be left out (a unit
    test's rounds run alone).

    Args:
        progress: takes the progress lines (every 10 s, and the estimate's after the
            warm-up).
        barrier: ``barrier(deadline, where, word=None)``, with several cells: meets the
            others before each round, after each timed round (with audits) and after the
            last, giving up on a cell not there by ``deadline`` (``stall_deadline``) and
            naming the round it was in (``where``); returns cell 0's ``word()``, called
            once every cell arrived (the audit's decision, one for all cells).
        audit: checks a round the draw audits, after it delivered, untimed.
        randomness: the audit draw's; None, the operating system's (unit tests give a
            seeded one).
        stall_timeout: ``--gost-stall-timeout``, every barrier's deadline.
        estimate: the whole run's, told when this test begins and when its warm-up ends.
        boundary: ``boundary(rounds)``, told in the teardown of each boundary's round
            (``partial.boundary_rounds``) but the test's last, untimed, that a checkpoint
            may be written (the plugin decides whether).
    """

    progress: Callable[[str], None] | None = None
    barrier: Callable[..., Any] | None = None
    audit: Callable[[AuditedRound], Audit] | None = None
    randomness: random.Random | None = None
    stall_timeout: float | None = None
    estimate: RunEstimate | None = None
    boundary: Callable[[Rounds], None] | None = None


@dataclass
class AuditedRound:
    """What an audit checks of one timed round, on the host after it ended: the data it was
    given (regenerated), the weights its segment started from, where its segment starts and
    each round's data (training: the audit replays the rounds before it), and what it gave
    back: the copies it delivered, and (training) what it did not deliver, read once the
    audit was drawn."""

    number: int  # the timed round, from 1
    image: np.ndarray
    out_residual: np.ndarray | None  # training only
    weights: dict  # the drawn host arrays, by row and name
    result: Any  # the output map (inference) or a TrainingResult of host arrays (training)
    updated: dict | None  # training: the weights after the round, host arrays
    # Training: the first timed round of the round's segment, and (image, residual) of a
    # timed round by its number, made when asked.
    segment: int = 1
    data: Callable[[int], tuple[np.ndarray, np.ndarray]] | None = None
    scales: ScaleTable | None = None  # an integer type's calibrated scales


class Rounds:
    """The setup, the timed target and the teardown of every round of one ``test``, with
    progress reports and audits (``links``).

    Training: the warm-up rounds start from the weights loaded with the test and form a
    segment of their own; timed round n starts a segment when (n - 1) is a multiple of
    ``segment_rounds``, and its setup loads the drawn weights again, audited or not.

    ``meter`` counts what the cell's cores did from the end of each timed round's setup to
    the start of its teardown (``performance/contention.py``): whether the cell was shared;
    a resumed test's counts go on from its checkpoint's.

    ``resume``: this cell's share of the test stopped at a boundary (``PartialCell``); the
    timed rounds go on from the next, after this run's own warm-up, the audits done kept
    and the draw going on from them (``AuditDraw``)."""

    def __init__(
        self, test: TimedTest, links: Links | None = None, resume: PartialCell | None = None
    ) -> None:
        links = Links() if links is None else links
        backend, network, mode, run_plan = test.backend, test.network, test.mode, test.plan
        default_rounds, self.residual_scale = training_data(backend.dtype)
        segment_rounds = default_rounds if test.segment_rounds is None else test.segment_rounds
        if segment_rounds < 1:
            raise ValueError(f"segment_rounds {segment_rounds}: a segment has at least 1 round")
        self.backend, self.network, self.mode, self.plan = backend, network, mode, run_plan
        self.links = links
        rng = np.random.default_rng([test.seed, test.cell])
        self.host_weights = benchmark_weights(network, rng)
        self.images = ImageSet(network.input_shape, test.seed, test.cell)
        # An integer type: weights and scales calibrated once on the first batch of images
        # (docs/benchmarking.md), handed over before the weights and before every round.
        self.itype = integer_type(backend.dtype)
        self.scales: ScaleTable | None = None
        if self.itype is not None:
            if mode != "inference":
                raise ValueError(f"{backend.dtype} is timed in inference only")
            if test.calibrate is None:
                raise ValueError(f"a {backend.dtype} benchmark needs its calibration (calibrate)")
            first_batch = self.images.batch(0, run_plan.batch)
            self.host_weights, self.scales = test.calibrate(network, self.host_weights, first_batch)
            backend.use_scales(self.scales)
        self.weights = backend.load_weights(network, self.host_weights)
        self.residuals = ResidualSet(test.seed, test.cell, self.residual_scale)
        self.segment_rounds = segment_rounds
        self.warmup_seconds: float | None = None  # the last warm-up round, barrier to barrier
        self.left_barrier: float | None = None
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
        # Whether a round is audited is drawn after it delivered (commit, then reveal): nothing
        # here holds a decision about a round to come (standard.md §7.7).
        self.draw: AuditDraw | None = None
        if links.audit:
            past = [a.round for a in self.audits]
            problem = (
                None if self.audit_failed else impossible_draw(run_plan.rounds, self.start, past)
            )
            if problem is not None:
                raise ValueError(f"resumed after timed round {self.start}: {problem}")
            self.draw = AuditDraw(run_plan.rounds, past, links.randomness)
        # Each timed round's fingerprint (None: it delivered nothing), the stopped run's first.
        self.fingerprints: list[str | None] = []
        if resume is not None:
            kept = resume.fingerprints or (None,) * self.start  # a checkpoint before them
            self.fingerprints = list(kept)
        self.error: str | None = None  # the backend's first failure; later rounds idle
        self.first_image = ""
        if resume is not None:
            self.first_image = image_checksum(self._image(1)[0])
        self.next_image = self.start * run_plan.batch  # images set up, with the resumed ones
        self.calls = 0  # rounds set up so far, warm-up included
        self.number = 0  # the timed round now set up or running (0: the warm-up)
        self.segment_end = False  # whether that round is its segment's last (set up untimed)
        self.done = self.start  # timed rounds that ended
        self.result: Any = None  # the backend's own result of the round now running
        self.delivered: list | None = None  # its host copies, until its audit is decided
        # A resumed test's counts go on from its stopped run's, over the same rounds as its
        # times (unknown when its checkpoint predates them).
        self.meter = ContentionMeter(
            earlier=None if resume is None else resume.contention,
            counted=resume is None or resume.contention is not None,
        )
        self.started = time.monotonic()
        self.last_report = self.started
        self.audit_seconds_before = self.audit_seconds  # a resumed test's earlier audits

    @property
    def _weight_shapes(self) -> list[tuple[int, str, tuple[int, ...]]]:
        """(row, name, shape) of each weight array, in the order a segment's end delivers
        them."""
        return [(n, k, self.host_weights[n][k].shape) for n, ws in self.weights.items() for k in ws]

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
        if self.links.barrier is not None:  # every cell's round starts together
            ended = self.calls - 1
            self._meet(self._round_name(ended) if ended else f"preparing {self._round_name(1)}")
        if number >= 1:
            self.meter.start()  # the last thing before the timed region
        return arguments, {}

    def end(self) -> None:
        """After the last round: every cell meets the others once more (with a barrier)."""
        if self.links.barrier is not None:
            self._meet(self._round_name(self.calls))

    @property
    def deadline(self) -> Deadline:
        """``stall_deadline``, given this cell's audit since the last barrier, if any."""
        return stall_deadline(
            self.links.stall_timeout, self.warmup_seconds, self.audit_before_barrier
        )

    def _meet(self, ended: str) -> None:
        self.links.barrier(self.deadline, ended)
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
        if self.links.estimate is None:
            return
        key = (self.network.latin, self.mode)
        if self.calls == 1:
            self.links.estimate.began(key)
        if self.calls == self.plan.warmup_rounds + 1:
            images = self.plan.warmup_rounds * self.plan.batch
            line = self.links.estimate.warmed_up(
                key, macs_per_image(self.network, self.mode) * images
            )
            if line is not None and self.links.progress is not None:
                self.links.progress(line)

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
        its results to the host, copied (``deliver``)."""
        if self.error is not None or self.audit_failed:
            return
        try:
            if residual is None:
                self.result = self.backend.infer(self.network, self.weights, image)
                self.backend.synchronize()
                self.delivered = deliver(self.backend, [self.result])
            else:
                self.result = self.backend.train(self.network, self.weights, image, residual)
                self.backend.synchronize()
                arrays = delivered(self.result, self.weights, self.segment_end)
                self.delivered = deliver(self.backend, arrays)
        except Exception as exc:  # noted and reported for every cell after the rounds
            self.error = _failure(exc, f"{self.mode} round")

    def teardown(self, *arguments) -> None:
        """After a round, untimed: what it delivered checked and fingerprinted, whether it
        is audited drawn (one draw for all cells), its audit if so, then its results let go."""
        self.meter.stop()  # the first thing after the timed region
        copies, result = self.delivered, self.result
        self.delivered = self.result = None
        if copies is not None and self.error is None:
            weights = [] if len(copies) == 1 else self._weight_shapes
            problem = delivery_problem(
                copies, self.network, self.plan.batch, self.backend.dtype, weights
            )
            if problem is not None:
                self.error = f"{self._round_name(self.calls)} delivered {problem}"
        ran = self.error is None and not self.audit_failed
        if ran:
            self.done = self.number  # counted here, not in the timed target
        if self.number >= 1:
            delivered_now = ran and copies is not None  # None: pytest-benchmark timed nothing
            self.fingerprints.append(fingerprint(copies[0]) if delivered_now else None)
            if self.draw is not None and self._drawn(self.number) and delivered_now:
                self._audit(copies, result)
        if self.links.boundary is not None and self.at_boundary:
            self.links.boundary(self)

    def _drawn(self, number: int) -> bool:
        """Whether timed round ``number``, delivered, is audited: drawn now, on cell 0 once
        every cell has met it after the round, and the same word given to every cell."""
        if self.links.barrier is None:
            return self.draw.decide(number)
        where = self._round_name(self.calls)
        return bool(self.links.barrier(self.deadline, where, lambda: self.draw.decide(number)))

    def _audit(self, copies: list, result: Any) -> None:
        started = time.monotonic()
        if self.mode == "inference":
            results: tuple = (copies[0], None)
        else:
            results = received(self.backend, copies, result, self.weights)
        audit = self.links.audit(self._rebuilt(self.number, *results))
        seconds = time.monotonic() - started
        self.audit_seconds += seconds
        self.audit_before_barrier = seconds
        self.audits.append(dataclasses.replace(audit, seconds=seconds))

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
            tuple(self.fingerprints),
        )

    def _rebuilt(self, number: int, result: Any, updated: dict | None) -> AuditedRound:
        """Timed round ``number`` as its audit sees it: its images and residual regenerated,
        the drawn weights and, training, the data of its segment's earlier rounds."""
        image = self._image(number)
        if self.mode == "inference":
            return AuditedRound(
                number, image, None, self.host_weights, result, None, scales=self.scales
            )
        return AuditedRound(
            number,
            image,
            self._residual(number),
            self.host_weights,
            result,
            updated,
            segment=segment_start(number, self.segment_rounds),
            data=lambda n: (self._image(n), self._residual(n)),
        )

    def _report(self, every: float = 10.0) -> None:
        now = time.monotonic()
        if self.links.progress is None or now - self.last_report < every:
            return
        self.last_report = now
        total = (self.plan.rounds + self.plan.warmup_rounds) * self.plan.batch
        done = self.next_image  # a resumed test's include the stopped run's
        # The rounds' rate, setup included and this run's audits not: the audits' time is
        # the run estimate's, after the "; ".
        rounds = now - self.started - (self.audit_seconds - self.audit_seconds_before)
        rate = (done - self.start * self.plan.batch) / rounds if rounds > 0 else 0.0
        left = (total - done) / rate if rate > 0 else math.inf
        line = (
            f"{subject(self.network, self.mode)}: {done}/{total} images "
            f"({100 * done / total:.1f}%, the warm-up's included), {rate:.3g} images/s in its "
            f"rounds, about {duration(left)} of rounds left"
        )
        if self.links.estimate is not None:
            kept = self.start * self.plan.batch  # the estimate counts this run's rounds
            key = (self.network.latin, self.mode)
            line += "; " + self.links.estimate.status(key, (done - kept) / (total - kept))
        self.links.progress(line)


def _failure(exc: Exception, during: str) -> str:
    return f"the backend raised {type(exc).__name__}: {exc} ({during})"
