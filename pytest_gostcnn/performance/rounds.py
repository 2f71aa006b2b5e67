"""Section 9: the timed rounds of one test of one network on one computing cell.

A round is one training iteration (9.3) or one forward pass (9.4) over one batch of the
cell's own images. Its untimed setup draws the batch from a key nobody held before
(``images.py``); the timed region hands it to the backend, runs the round and reads its
results back to the host, copied (``delivery.py``), so no work on a round's inputs is done
where no clock runs (standard.md §7.7). Training runs in segments (``training_data.py``),
each from the drawn weights, reloaded inside the segment's first timed round, and checks
units of k rounds of a segment (``checks.Units``): the last round of each keeps the suite's
own copy of the weights it ended with inside its timed region (``kept.py``), k measured in
the warm-up. Once a unit has delivered, whether it is checked is drawn with the test's
chance (``checks.py``), and a checked one is judged by ``round_checks.py``.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from pytest_gostcnn.conformance.fixed_point import calibrate
from pytest_gostcnn.model.fixed_point import ScaleTable, integer_type, quantise

from .cells import Deadline
from .checks import CheckDraw, Units
from .contention import ContentionMeter
from .delivery import deliver, delivery_problem, fingerprint
from .images import ImageSet, image_checksum, round_key, seed_key
from .kept import KeptWeights, copy_share, fixed_unit, unit_rounds
from .partial import PartialCell, boundary_rounds
from .probe import probe
from .progress import TestProgress
from .round_checks import RoundChecks
from .stall import stall_deadline
from .timed_test import Links, TimedTest
from .timing import Check
from .training_data import benchmark_weights, training_data


class Rounds:
    """The setup, the timed target and the teardown of every round of one ``test``, with
    progress lines and checks; ``loop.run`` runs them and times each target.

    Training: the warm-up rounds start from the weights loaded with the test and form a
    segment of their own; timed round n starts a segment when (n - 1) is a multiple of
    ``segment_rounds``, and its timed region loads the drawn weights again. The last warm-up
    round measures the suite's copy of the weights against the round, which sets
    ``unit_rounds`` (k) unless the test or its checkpoint fixes it.

    ``meter`` counts what the cell's cores did in each timed round's target
    (``performance/contention.py``, started and stopped by the loop): whether the cell was
    shared; a resumed test's counts go on from its checkpoint's.

    ``resume``: this cell's share of the test stopped at a boundary (``PartialCell``); the
    timed rounds go on from the next, after this run's own warm-up, the checks done kept
    (each unit's draw is its own, so the draw needs nothing of theirs)."""

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
        self.links, self.cell, self.device = links, test.cell, test.device
        self.peak = test.peak
        rng = np.random.default_rng([test.seed, test.cell])
        self.host_weights = benchmark_weights(network, rng)
        # An integer type: weights and scales calibrated once on a batch of the seed's
        # (docs/benchmarking.md), handed over before the weights and in every round.
        self.itype = integer_type(backend.dtype)
        self.scales: ScaleTable | None = None
        if self.itype is not None:
            if mode != "inference":
                raise ValueError(f"{backend.dtype} is timed in inference only")
            images = ImageSet(network.input_shape, seed_key(test.seed, test.cell))
            first_batch = images.batch(0, run_plan.batch)
            data = calibrate(network, self.host_weights, first_batch, self.itype)
            self.host_weights, self.scales = data.weights, data.scales
            backend.use_scales(self.scales)
        self.weights = backend.load_weights(network, self.host_weights)
        self.probe = probe(backend, network, self.host_weights, run_plan.batch, self.scales)
        self.segment_rounds = segment_rounds
        given = test.unit_rounds
        if resume is not None:  # a checkpoint from before units of rounds checked segments
            given = segment_rounds if resume.unit_rounds is None else resume.unit_rounds
        self.unit_rounds = fixed_unit(mode, segment_rounds, given, run_plan.warmup_rounds)
        self.measuring = self.unit_rounds is None  # the same on every cell
        self.copies: tuple[float, float, float] | None = None  # the warm-up's seconds
        self.kept = KeptWeights(backend) if mode == "training" else None
        self.warmup_seconds: float | None = None  # the last warm-up round, barrier to barrier
        self.left_barrier: float | None = None
        self.boundary_rounds = boundary_rounds(mode, segment_rounds)
        # Timed rounds a stopped run did (resumed), their seconds, checks and checks' time.
        self.start = 0 if resume is None else len(resume.round_seconds)
        self.earlier_seconds = () if resume is None else resume.round_seconds
        self.seconds: list[float] = []  # this run's timed rounds', as the loop timed them
        self.checks: list[Check] = [] if resume is None else list(resume.checks)
        self.check_seconds = 0.0 if resume is None else resume.check_seconds
        self.check_before_barrier: float | None = None  # the check since the last barrier
        if resume is not None:
            resume.check_place(run_plan.rounds, self.boundary_rounds)
        self.randomness = links.randomness
        # Each unit's draw is made after it delivered (commit, then reveal), with the same
        # chance for every unit: nothing here holds a decision about one to come. A unit
        # measured in the warm-up sets the chance there.
        self.draw = CheckDraw(self.units.chance, links.randomness) if test.checked else None
        self.checker = RoundChecks(
            backend,
            network,
            mode,
            self.host_weights,
            run_plan.batch,
            self.residual_scale,
            test.threshold,
            self.scales,
            test.library,
        )
        # Each timed round's fingerprint (None: it delivered nothing), the stopped run's first.
        self.fingerprints: list[str | None] = []
        if resume is not None:
            kept = resume.fingerprints or (None,) * self.start  # a checkpoint before them
            self.fingerprints = list(kept)
        self.error: str | None = None  # the backend's first failure; later rounds idle
        self.first_image = "" if resume is None else resume.first_image
        self.next_image = self.start * run_plan.batch  # images set up, with the resumed ones
        self.calls = 0  # rounds set up so far, warm-up included
        self.number = 0  # the timed round now set up or running (0: the warm-up)
        self.segment_end = False  # whether that round is its segment's last (set up untimed)
        self.unit_end = False  # whether it is its unit's last (training: it keeps the weights)
        self.key = 0  # the data key of the round set up, kept until its check's draw
        self.done = self.start  # timed rounds that ended
        self.result: Any = None  # the backend's own result of the round now running
        self.delivered: list | None = None  # its host copies, until its check is decided
        # A resumed test's counts go on from its stopped run's, over the same rounds as its
        # times (unknown when its checkpoint predates them).
        self.meter = ContentionMeter(
            earlier=None if resume is None else resume.contention,
            counted=resume is None or resume.contention is not None,
        )
        self.check_seconds_before = self.check_seconds  # a resumed test's earlier checks
        self.progress = TestProgress(network, mode, run_plan, self.start, links.estimate)

    @property
    def units(self) -> Units:
        """The units the test's checks are drawn over (training's, once k is known)."""
        training = self.mode == "training"
        return Units(
            self.mode,
            self.plan.rounds,
            self.segment_rounds if training else None,
            self.unit_rounds if training else None,
        )

    @property
    def copy_share(self) -> float | None:
        """What the copies cost a timed round at this k, as the warm-up timed them."""
        return None if self.copies is None else copy_share(*self.copies, self.unit_rounds)

    @property
    def check_failed(self) -> bool:  # the test calls the backend no more
        return any(not check.passed for check in self.checks)

    def ends_segment(self, number: int) -> bool:
        """Timed round ``number`` (0 or less: a warm-up round) ends its segment."""
        if number <= 0:
            return number == 0
        return number % self.segment_rounds == 0 or number == self.plan.rounds

    def starts_segment(self, number: int) -> bool:
        return number >= 1 and (number - 1) % self.segment_rounds == 0

    def ends_unit(self, number: int) -> bool:
        """Timed round ``number`` (0 or less: a warm-up round, a unit of its own) is the last
        of its check's unit: every inference round; training's k-th of a segment, or a
        segment's last."""
        return number <= 0 or self.mode != "training" or self.units.last(number) == number

    # The setup draws the round's key and makes its host data (the suite's generator, which
    # a system would stream from storage, stays untimed); the hand-over to the backend is
    # the timed region's (standard.md §7.7).
    def setup(self, key: int | None = None) -> tuple:
        """The next round's arguments for ``target`` (``begin``, then ``arguments``).
        ``key``: the round's data key, given (the paired gate's baseline takes its
        candidate's); None: drawn now."""
        self.begin()
        return self.arguments(key)

    def begin(self) -> None:
        """The next round is set up: counted, and its progress lines made (told before the
        cells meet, so that no cell's round starts later for printing)."""
        self.calls += 1
        self.progress.setting_up(self.calls)
        number = self.calls - self.plan.warmup_rounds
        if number > 0:
            number += self.start  # a resumed test's rounds go on from the stopped run's
        self.number = max(0, number)
        self.segment_end = self.ends_segment(number)
        self.unit_end = self.ends_unit(number)
        self.progress.set_up(self.next_image, self.check_seconds - self.check_seconds_before)

    def arguments(self, key: int | None = None) -> tuple:
        """The round begun: every cell meets the others, then its data is made."""
        batch = self.plan.batch
        if self.links.meeting is not None:  # every cell's round starts together
            ended = self.calls - 1
            self._meet(self._round_name(ended) if ended else f"preparing {self._round_name(1)}")
        arguments: tuple = (None,)
        try:
            if self.error is None and not self.check_failed:
                arguments = self._arguments(batch, self.number, key)
        except Exception as exc:  # noted; this cell still meets the others at the barrier
            self.error = _failure(exc, "preparing a batch")
        self.next_image += batch
        return arguments

    def end(self) -> None:
        """After the last round: every cell meets the others once more (with a meeting)."""
        if self.links.meeting is not None:
            self._meet(self._round_name(self.calls))

    @property
    def deadline(self) -> Deadline:
        """``stall_deadline``, given this cell's check since the last barrier, if any."""
        return stall_deadline(
            self.links.stall_timeout, self.warmup_seconds, self.check_before_barrier
        )

    def _meet(self, ended: str) -> None:
        self.links.meeting.meet(self.deadline, ended)
        self.check_before_barrier = None
        now = time.monotonic()
        if self.calls == self.plan.warmup_rounds + 1 and self.left_barrier is not None:
            self.warmup_seconds = now - self.left_barrier  # the slowest cell's, as all wait
        self.left_barrier = now

    def _round_name(self, call: int) -> str:
        """The round ``setup`` was called for the ``call``-th time (from 1)."""
        if call <= self.plan.warmup_rounds:
            return "the warm-up round"
        return f"timed round {call - self.plan.warmup_rounds + self.start} of {self.plan.rounds}"

    def _arguments(self, batch: int, number: int, key: int | None) -> tuple:
        """The round's host images (an integer type's, at the input's scale) and, training,
        its output residual, from ``key`` or one drawn now."""
        self.key = round_key(self.randomness) if key is None else key
        host = self.checker.images(self.key)
        if number == 1:
            self.first_image = image_checksum(host[0])
        if self.scales is not None:
            first = self.scales[self.network.layers[0].number].inputs[0]
            host = quantise(host, first, self.itype)
        if self.mode == "inference":
            return (host,)
        return (host, self.checker.out_residual(self.key))

    def target(self, host, out_residual=None) -> None:
        """The timed region: the round's data handed to the backend (and, at a segment's
        start, the drawn weights), its call, ``synchronize()``, the read that delivers its
        output to the host, copied (``deliver``), and at a training unit's end the suite's
        copy of the weights and input residual (``kept.py``)."""
        if self.error is not None or self.check_failed:
            return
        backend = self.backend
        started = time.perf_counter()
        try:
            if self.scales is not None:
                backend.use_scales(self.scales)
            if out_residual is None:
                image = backend.to_device(host)
                self.result = backend.infer(self.network, self.weights, image)
                backend.synchronize()
                self.delivered = deliver(backend, [self.result])
                return
            if self.starts_segment(self.number):
                self.weights = backend.load_weights(self.network, self.host_weights)
            given = backend.to_device(out_residual)
            self.result = backend.train(self.network, self.weights, backend.to_device(host), given)
            backend.synchronize()
            self.delivered = deliver(backend, [self.result.output])
            if self.number >= 1:  # after the read, which lazy work awaits
                self.kept.keep(self.weights, self.result.input_residual, self.unit_end)
            if self.number == 0 and self.calls == self.plan.warmup_rounds:
                self._measure_copy(time.perf_counter() - started)
        except Exception as exc:  # noted and reported for every cell after the rounds
            self.error = _failure(exc, f"{self.mode} round")

    def _measure_copy(self, round_seconds: float) -> None:
        """The last warm-up round: the copies timed against it, k from them unless fixed."""
        self.copies = (*self.kept.measure(self.weights, self.result.input_residual), round_seconds)
        if self.measuring:
            self.unit_rounds = unit_rounds(*self.copies, self.segment_rounds)

    def teardown(self) -> None:
        """After a round, untimed: what it delivered checked and fingerprinted, whether its
        unit is checked drawn once the unit delivered (one draw for all cells), its check
        if so, then its results let go."""
        copies = self.delivered
        self.delivered = self.result = None
        if copies is not None and self.error is None:
            problem = delivery_problem(copies, self.network, self.plan.batch, self.backend.dtype)
            if problem is not None:
                self.error = f"{self._round_name(self.calls)} delivered {problem}"
        ran = self.error is None and not self.check_failed
        if ran:
            self.done = self.number  # counted here, not in the timed target
        if self.number == 0 and self.calls == self.plan.warmup_rounds:
            self._agree_unit()
        if self.number >= 1:
            delivered_now = ran and copies is not None
            self.fingerprints.append(fingerprint(copies[0]) if delivered_now else None)
            if self.draw is not None:
                self._check(copies if delivered_now else None)
            elif self.kept is not None and self.unit_end:  # nothing drawn: the copies go
                self.kept.next_unit(self.segment_end)

    def _agree_unit(self) -> None:
        """After the warm-up: k is cell 0's on every cell; the chance and the share follow."""
        if self.measuring and self.links.meeting is not None:
            self.unit_rounds = self.links.meeting.meet(
                self.deadline, "the warm-up round", lambda: self.unit_rounds
            )
        if self.unit_rounds is None:  # the warm-up failed: the error ends the test
            self.unit_rounds = self.segment_rounds
        if self.copies is not None:
            self.kept.reserve(self.unit_rounds)  # every round's residual buffer, before any
        if self.measuring and isinstance(self.draw, CheckDraw):
            self.draw.chance = self.units.chance

    def _check(self, copies: list | None) -> None:
        """Keep what a training round delivered for its unit's check; once the unit has
        delivered (an inference round, a training unit's last round), draw and judge it."""
        training = self.mode == "training"
        if training and copies is not None:
            self.checker.keep(self.number, self.key, copies[0])
        if not self.unit_end:
            return
        checked, image = self._drawn()
        whole = copies is not None and (
            not training
            or (
                len(self.checker.kept) == self.number - self.units.first(self.number) + 1
                and len(self.kept.residuals) == len(self.checker.kept)
                and self.kept.after is not None
            )
        )
        if checked and whole:
            started = time.monotonic()
            if training:
                first = self.units.first(self.number)
                check = self.checker.unit(self.kept, (first - 1) % self.segment_rounds)
            else:
                check = self.checker.image(self.number, self.key, image, copies[0])
            self.check_seconds += check.seconds
            self.check_before_barrier = time.monotonic() - started
            self.checks.append(check)
        self.checker.forget()
        if training:
            self.kept.next_unit(self.segment_end)
        self.key = 0

    def _drawn(self) -> tuple[bool, int | None]:
        """Whether the unit that just delivered is checked, and (inference) which image:
        drawn now, on cell 0 once every cell has met after the round, the same word given
        to every cell."""

        def word() -> tuple[bool, int | None]:
            checked = self.draw.decide()
            image = (
                self.draw.image(self.plan.batch) if checked and self.mode == "inference" else None
            )
            return checked, image

        if self.links.meeting is None:
            return word()
        where = self._round_name(self.calls)
        checked, image = self.links.meeting.meet(self.deadline, where, word)
        return bool(checked), image

    @property
    def at_boundary(self) -> bool:
        """The timed round just ended is a boundary's (``partial.boundary_rounds``) and not
        the test's last: the same on every cell, whatever this one's backend did (the
        checkpoint is a collective call; it keeps nothing when a cell's backend failed)."""
        return 0 < self.number < self.plan.rounds and self.number % self.boundary_rounds == 0


def _failure(exc: Exception, during: str) -> str:
    return f"the backend raised {type(exc).__name__}: {exc} ({during})"
