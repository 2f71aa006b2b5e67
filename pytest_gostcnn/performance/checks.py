"""Which timed rounds of a test are checked (standard.md §7.7, fifth release): each round
(training: each segment) with the same chance, drawn after it delivered, independently of
every other, from the operating system's randomness; the chance follows from a stated power.

A check's unit is a round in inference and a segment in training (a segment is judged
whole). A backend that skips, repeats or degrades ``CHEAT_SHARES[mode]`` of a test's units
leaves ceil(share x units) of them wrong, and passes only if none is checked:
(1 - chance) ** ceil(share x units). The chance is the smallest that keeps this at most
1 - ``POWER``; a test whose share is a single unit or less checks every unit.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

POWER = 0.99  # the least chance that a cheat of CHEAT_SHARES[mode] of the units fails
CHEAT_SHARES = {"inference": 0.01, "training": 0.05}
# ``check`` refuses a count of checks whose chance under the stated one is below this (a
# Chernoff bound on either tail: an honest draw is refused less than once in 10^9 reports).
IMPLAUSIBLE = 1e-9


def check_units(mode: str, rounds: int, segment_rounds: int | None) -> int:
    """The units a test's checks are drawn over: its rounds, or (training) its segments."""
    if mode == "training":
        if not segment_rounds:
            raise ValueError("a training test's checks need its segment length")
        return math.ceil(rounds / segment_rounds)
    return rounds


def wrong_units(mode: str, units: int, share: float | None = None) -> int:
    """The units a cheat on ``share`` (by default the mode's) of ``units`` leaves wrong."""
    share = CHEAT_SHARES[mode] if share is None else share
    return max(1, math.ceil(share * units - 1e-9))


def check_chance(mode: str, units: int) -> float:
    """Each unit's chance to be checked, the least that gives ``POWER`` against a cheat on
    ``CHEAT_SHARES[mode]`` of ``units``; 1 where that share is a single unit."""
    wrong = wrong_units(mode, units)
    if wrong <= 1:
        return 1.0
    return 1.0 - (1.0 - POWER) ** (1.0 / wrong)


def power(mode: str, units: int, chance: float, share: float | None = None) -> float:
    """The chance that a backend wrong in ``share`` (by default the mode's) of ``units``
    has at least one of them checked, and so fails."""
    return 1.0 - (1.0 - chance) ** wrong_units(mode, units, share)


def power_text(mode: str, units: int, chance: float) -> str:
    """The power as a sentence: "a backend wrong in 1 % of these rounds would have failed
    with probability 99.4 %"."""
    share = CHEAT_SHARES[mode]
    unit = "rounds" if mode == "inference" else "segments"
    achieved = power(mode, units, chance)
    return (
        f"a backend that skipped or degraded {100 * share:g} % of these {unit} would have "
        f"failed with probability {_percent(achieved)} %"
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
        chance: each unit's (``check_chance``).
        randomness: the operating system's (``random.SystemRandom``, which keeps no state
            to read) unless a unit test gives a seeded generator.
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
