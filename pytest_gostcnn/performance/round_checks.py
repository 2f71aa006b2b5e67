"""The checks of one test's timed rounds (standard.md §7.7, fifth release): what a unit
delivered kept until its draw, the draw, and section 8's rule on the units drawn.

Inference: each round, once delivered, is checked with the test's chance; a check judges
one image of it, drawn then, against the float64 reference of that image. Training: each
unit (k rounds of a segment, ``checks.Units``), once its last round delivered, is checked
with the test's chance; a check replays the unit from the weights the backend held before it
(the suite's copy, ``kept.py``, or at a segment's start the drawn weights) and compares every
round's delivered output, and the weights and input residual the suite kept at its end.
Only the copies made inside the timed rounds are judged: nothing is read from the backend
after a draw, so no read tells it what was drawn.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from pytest_gostcnn.backend import Backend
from pytest_gostcnn.conformance.verification import (
    DeliveredRound,
    Verification,
    bound_weights,
    verify_round,
    verify_unit,
)
from pytest_gostcnn.machine.pool import reference_work
from pytest_gostcnn.model.fixed_point import ScaleTable
from pytest_gostcnn.model.network import Network
from pytest_gostcnn.reference.library import NUMPY, ReferenceLibrary

from .images import ImageSet, residual
from .kept import KeptWeights
from .timing import Check


@dataclass(frozen=True)
class KeptRound:
    """A timed round of the unit under way: its data key and its delivered output."""

    number: int
    key: int
    output: np.ndarray


class RoundChecks:
    """Judges the units a test's draw checks.

    Args:
        backend, network, mode: the test's.
        weights: the drawn host weights (an integer type's, its integers) every segment,
            and inference, start from.
        batch: the test's.
        residual_scale: training's output residual's scale.
        threshold: ``--gost-rmse-threshold`` (None: СКОП as derived).
        scales: an integer type's calibrated scales.
        library: the array library the float64 reference runs on.
    """

    def __init__(
        self,
        backend: Backend,
        network: Network,
        mode: str,
        weights: dict,
        batch: int,
        residual_scale: float,
        threshold: float | None = None,
        scales: ScaleTable | None = None,
        library: ReferenceLibrary = NUMPY,
    ) -> None:
        self.backend, self.network, self.mode = backend, network, mode
        self.weights, self.batch, self.residual_scale = weights, batch, residual_scale
        self.threshold, self.scales, self.library = threshold, scales, library
        self.kept: list[KeptRound] = []  # training: the unit under way
        self.bound: dict | None = None  # inference: the weights as the reference reads them

    def images(self, key: int) -> np.ndarray:
        """The host images of the round keyed ``key``."""
        return ImageSet(self.network.input_shape, key).batch(0, self.batch)

    def out_residual(self, key: int) -> np.ndarray:
        """The output residual of the training round keyed ``key``."""
        shape = (self.batch, *self.network.output_shape)
        return residual(key, shape, self.residual_scale)

    def keep(self, number: int, key: int, output: np.ndarray) -> None:
        """A training round's delivered output, kept until its unit's draw."""
        self.kept.append(KeptRound(number, key, output))

    def forget(self) -> None:
        """The unit's draw is made: its kept rounds go."""
        self.kept = []

    def image(self, number: int, key: int, image: int, output: np.ndarray) -> Check:
        """Check image ``image`` of inference round ``number`` (keyed ``key``), whose
        delivered output map is ``output``."""
        host = ImageSet(self.network.input_shape, key).batch(image, 1)  # an integer type's
        # reference quantises it as the round's setup did
        weights = self.weights
        if self.scales is None:  # bound once for all the test's checks
            if self.bound is None:
                self.bound = bound_weights(self.weights, self.backend.dtype, self.library)
            weights = self.bound
        return self._judged(
            number,
            1,
            [key],
            image,
            lambda: verify_round(
                self.backend,
                self.network,
                weights,
                host,
                output[image : image + 1],
                self.threshold,
                self.scales,
                self.library,
            ),
        )

    def unit(self, kept: KeptWeights, prior: int) -> Check:
        """Check the unit whose rounds are kept, from the weights it started with (the
        suite's copy, ``prior`` rounds into its segment, or at a segment's start the drawn
        weights) to the weights the suite kept at its end, with each round's input
        residual."""
        start = self.weights if kept.before is None else kept.before
        rounds = [
            DeliveredRound(
                kept.number,
                kept.output,
                lambda key=kept.key: (self.images(key), self.out_residual(key)),
            )
            for kept in self.kept
        ]
        return self._judged(
            self.kept[0].number,
            len(self.kept),
            [kept.key for kept in self.kept],
            None,
            lambda: verify_unit(
                self.backend,
                self.network,
                start,
                rounds,
                kept.after,
                kept.residuals,
                self.threshold,
                self.library,
                kept=kept.before is not None,
                drawn=self.weights,
                prior=prior,
            ),
        )

    def _judged(self, first: int, rounds: int, keys: list[int], image, verify) -> Check:
        started = time.monotonic()
        with reference_work():
            result: Verification = verify()
        worst = result.worst
        return Check(
            round=first,
            passed=not result.failed,
            verdict=result.verdict,
            worst_array=worst.name if worst else None,
            worst_ratio=None if worst is None or math.isinf(worst.ratio) else worst.ratio,
            failure=result.first_failure,
            seconds=time.monotonic() - started,
            rounds=rounds,
            image=image,
            keys=tuple(f"{key:032x}" for key in keys),
        )
