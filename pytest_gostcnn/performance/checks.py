"""Which timed rounds of a test are checked (standard.md §7.7): each unit with the same
chance, drawn after it delivered, independently of every other, from the operating system's
randomness; the chance follows from a stated power.

A check's unit is a round, or in training ``unit_rounds`` consecutive rounds of a segment
(k, the fewest that keep the suite's copy of the weights within 1 % of the units' time:
``kept.py``). A backend that skips, repeats or degrades ``CHEAT_SHARES[mode]`` of a test's
rounds leaves ceil(share x rounds) of them wrong, which fill at least ceil(that / k) units,
and passes only if none of those is checked: (1 - chance) ** units. The chance is the
smallest that keeps this at most 1 - ``POWER``; a test whose share is a single unit or less
checks every unit. A report from before units of rounds (``unit_rounds`` None) drew over
whole segments, its power over a share of them; it is read as it was written.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

POWER = 0.99  # the least chance that a cheat of CHEAT_SHARES[mode] of the rounds fails
CHEAT_SHARES = {"inference": 0.01, "training": 0.05}
# ``check`` refuses a count of checks whose chance under the stated one is below this (a
# Chernoff bound on either tail: an honest draw is refused less than once in 10^9 reports).
IMPLAUSIBLE = 1e-9


@dataclass(frozen=True)
class Units:
    """The units a test's checks are drawn over, in the order they deliver.

    Args:
        mode: the test's.
        rounds: its timed rounds.
        segment_rounds: training's segment length; a unit never spans two segments.
        unit_rounds: training's k; None for a report that predates it (a unit is a segment).
    """

    mode: str
    rounds: int
    segment_rounds: int | None = None
    unit_rounds: int | None = None

    def __post_init__(self) -> None:
        if self.mode == "training" and not self.segment_rounds:
            raise ValueError("a training test's checks need its segment length")
        if self.unit_rounds is not None and self.unit_rounds < 1:
            raise ValueError(f"unit_rounds {self.unit_rounds}: a unit has at least 1 round")

    @property
    def length(self) -> int:
        """The rounds of a whole unit."""
        if self.mode != "training":
            return 1
        return min(self.unit_rounds or self.segment_rounds, self.segment_rounds)

    @property
    def segments(self) -> bool:
        """A report's from before units of rounds: its units are whole segments."""
        return self.mode == "training" and self.unit_rounds is None

    def index(self, number: int) -> int:
        """The unit timed round ``number`` (from 1) lies in, from 0."""
        if self.mode != "training":
            return number - 1
        segment, place = divmod(number - 1, self.segment_rounds)
        return segment * math.ceil(self.segment_rounds / self.length) + place // self.length

    def first(self, number: int) -> int:
        """The first round of the unit timed round ``number`` lies in."""
        if self.mode != "training":
            return number
        place = (number - 1) % self.segment_rounds
        return number - place % self.length

    def last(self, number: int) -> int:
        """The last round of the unit timed round ``number`` lies in: a whole unit's, or its
        segment's, or the test's."""
        if self.mode != "training":
            return number
        segment_end = number - (number - 1) % self.segment_rounds + self.segment_rounds - 1
        return min(self.first(number) + self.length - 1, segment_end, self.rounds)

    def up_to(self, rounds: int) -> int:
        """The units that end in the first ``rounds`` timed rounds (a boundary ends one)."""
        return 0 if rounds < 1 else self.index(rounds) + 1

    @property
    def count(self) -> int:
        return self.up_to(self.rounds)

    def wrong(self, share: float | None = None) -> int:
        """The fewest units a backend wrong in ``share`` (by default the mode's) of the
        rounds leaves wrong (of the segments, in a report from before units of rounds)."""
        share = CHEAT_SHARES[self.mode] if share is None else share
        if self.segments:
            return max(1, math.ceil(share * self.count - 1e-9))
        rounds = max(1, math.ceil(share * self.rounds - 1e-9))
        return math.ceil(rounds / self.length)

    @property
    def chance(self) -> float:
        """Each unit's chance to be checked, the least that gives ``POWER`` against a cheat
        on ``CHEAT_SHARES[mode]`` of the rounds; 1 where that fills a single unit."""
        wrong = self.wrong()
        if wrong <= 1:
            return 1.0
        return 1.0 - (1.0 - POWER) ** (1.0 / wrong)

    def power(self, chance: float, share: float | None = None) -> float:
        """The chance that a backend wrong in ``share`` (by default the mode's) of the
        rounds has one of its wrong units checked, and so fails."""
        return 1.0 - (1.0 - chance) ** self.wrong(share)

    def power_text(self, chance: float) -> str:
        """The power as a sentence: "a backend that skipped or degraded 1 % of these rounds
        would have failed with probability 99.4 %"."""
        share = CHEAT_SHARES[self.mode]
        what = "segments" if self.segments else "rounds"
        return (
            f"a backend that skipped or degraded {100 * share:g} % of these {what} would have "
            f"failed with probability {_percent(self.power(chance))} %"
        )


def _percent(probability: float) -> str:
    """99.4, 99.9999, 100: as many places as it takes to show how far from 100 it is."""
    if probability >= 1.0:
        return "100"
    places = max(1, math.floor(-math.log10(1.0 - probability)) - 1)
    return f"{100 * probability:.{places}f}"


def implausible_checks(chance: float, decided: int, checked: int) -> str | None:
    """Why ``checked`` checks among ``decided`` units cannot come from ``chance``, or None:
    more than decided, anything but all at chance 1, or a count whose tail has a Chernoff
    bound below ``IMPLAUSIBLE``."""
    if not 0 <= checked <= decided:
        return f"{checked} checks among {decided} units"
    if chance >= 1.0:
        if checked != decided:
            return f"{checked} checks among {decided} units, where every unit is checked"
        return None
    if decided == 0:
        return None
    bound = math.exp(-decided * _divergence(checked / decided, chance))
    if bound >= IMPLAUSIBLE:
        return None
    return (
        f"{checked} checks among {decided} units, where a chance of {chance:.4g} gives about "
        f"{chance * decided:.3g}: a draw gives so few or so many with probability below "
        f"{IMPLAUSIBLE:g}"
    )


def _divergence(share: float, chance: float) -> float:
    """The Kullback-Leibler divergence of Bernoulli(``share``) from Bernoulli(``chance``)."""

    def term(a: float, b: float) -> float:
        return 0.0 if a == 0 else a * math.log(a / b)

    if chance <= 0.0:
        return math.inf if share > 0 else 0.0
    return term(share, chance) + term(1.0 - share, 1.0 - chance)


@dataclass
class CheckDraw:
    """The draw of one test's checks: ``decide()`` is called once a unit has delivered and
    holds nothing of any later unit; ``image(batch)``, an inference check's image.

    Args:
        chance: each unit's (``Units.chance``).
        randomness: the operating system's (``random.SystemRandom``, which keeps no state
            to read) unless the project's tests give a seeded generator.
    """

    chance: float
    randomness: random.Random | None = None

    def __post_init__(self) -> None:
        if not 0.0 < self.chance <= 1.0:
            raise ValueError(f"a check's chance {self.chance!r} is not in (0, 1]")
        if self.randomness is None:
            self.randomness = random.SystemRandom()

    def decide(self) -> bool:
        """Whether the unit that just delivered is checked."""
        return self.chance >= 1.0 or self.randomness.random() < self.chance

    def image(self, batch: int) -> int:
        """Which image of an inference round its check judges."""
        return self.randomness.randrange(batch)
