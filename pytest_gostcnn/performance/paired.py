"""The paired gate's rounds (``--gost-versus``): one test timed on two backends side by
side, the candidate's and the baseline's rounds alternating in pairs.

Each pair's two rounds run on the same images (one data key for both, drawn in the pair's
setup) one after the other, in an order drawn per pair, so that whatever the machine does
for a moment falls on both and neither backend always runs warm after the other. Each
backend's round is its own ``Rounds``' timed region, timed on its own; each is checked as
it would be alone (docs/benchmarking.md, "The paired gate").
"""

from __future__ import annotations

import random
import time

from .rounds import Rounds


class PairedRounds:
    """The setup, timed target and teardown of every pair of one test's rounds, for
        pytest-benchmark's loop, which times the pair; each backend's own seconds of each timed
        round are kept here, in pair order (the warm-up's left out); ``pairs``: how many of the
    first are pairs, both backends' rounds run (none from the round one of them failed in)."""

    def __init__(
        self, candidate: Rounds, baseline: Rounds, randomness: random.Random | None = None
    ) -> None:
        self.candidate, self.baseline = candidate, baseline
        self.randomness = random.SystemRandom() if randomness is None else randomness
        self.candidate_seconds: list[float] = []
        self.baseline_seconds: list[float] = []
        self.candidate_first: list[bool] = []  # per timed pair
        self.pairs = 0
        self._pair: tuple[tuple, tuple, bool] | None = None

    def setup(self) -> tuple[tuple, dict]:
        """Both rounds set up on one key (the candidate's drawn, given to the baseline), and
        which runs first drawn."""
        first, _ = self.candidate.setup()
        second, _ = self.baseline.setup(key=self.candidate.key or None)
        self._pair = (first, second, self.randomness.random() < 0.5)
        return (), {}

    def target(self) -> None:
        """The pair: each backend's timed region, in the drawn order, timed on its own."""
        candidate_arguments, baseline_arguments, candidate_first = self._pair
        turns = [
            (self.candidate, candidate_arguments, self.candidate_seconds),
            (self.baseline, baseline_arguments, self.baseline_seconds),
        ]
        if not candidate_first:
            turns.reverse()
        timed = self.candidate.number >= 1
        for rounds, arguments, seconds in turns:
            if timed:  # both rounds' setups started it: each counts its own turn only
                rounds.meter.start()
            started = time.perf_counter()
            rounds.target(*arguments)
            elapsed = time.perf_counter() - started
            if timed:
                rounds.meter.stop()
                seconds.append(elapsed)
        if timed:
            self.candidate_first.append(candidate_first)
            # A backend that failed runs no more rounds: its later "rounds" pair nothing.
            if self.candidate.error is None and self.baseline.error is None:
                self.pairs += 1

    def teardown(self, *arguments) -> None:
        self._pair = None
        self.candidate.teardown()
        self.baseline.teardown()

    def end(self) -> None:
        self.candidate.end()
        self.baseline.end()
