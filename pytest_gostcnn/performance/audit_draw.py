"""Which timed rounds of a test are audited (standard.md §7.7): one among the first ten,
another among the last ten, one more per 10,000 between, decided round by round, each
after its round delivered (commit, then reveal), from the operating system's randomness.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from fractions import Fraction

# Audited rounds: one among the first AUDIT_WINDOW timed rounds, another among the last
# AUDIT_WINDOW, and one more anywhere between per AUDIT_EVERY rounds of a long run.
AUDIT_WINDOW = 10
AUDIT_EVERY = 10_000


def _windows(rounds: int) -> tuple[range, range, range]:
    """The first window, the last (they overlap below 20 rounds) and the rounds between."""
    first = range(1, min(AUDIT_WINDOW, rounds) + 1)
    last = range(max(1, rounds - AUDIT_WINDOW + 1), rounds + 1)
    return first, last, range(AUDIT_WINDOW + 1, rounds - AUDIT_WINDOW + 1)


def _pairs(rounds: int, done: int, past: set[int]) -> list[tuple[int, int, Fraction]]:
    """Every (first, last) pair of the windows, with the chance the draw gives it (the
    first uniform in its window, the last uniform among the others of its own), that agrees
    with which of the windows' rounds up to ``done`` were audited (``past``)."""
    first_window, last_window, _ = _windows(rounds)
    windows = set(first_window) | set(last_window)
    seen = {r for r in past if r in windows and r <= done}
    pairs = []
    for first in first_window:
        others = len(last_window) - (first in last_window)
        for last in last_window:
            if last != first and {r for r in (first, last) if r <= done} == seen:
                pairs.append((first, last, Fraction(1, len(first_window) * others)))
    return pairs


def audit_chance(rounds: int, number: int, past: Sequence[int]) -> Fraction:
    """The chance that timed round ``number`` of ``rounds`` is audited, given that the
    rounds before it audited are ``past`` (and no other): the draw's own distribution,
    conditioned on what it decided so far. 0 where ``past`` is no draw's."""
    if rounds < 2:
        return Fraction(1)
    _, _, between = _windows(rounds)
    if number in between:
        wanted = min(rounds // AUDIT_EVERY, len(between))
        kept = sum(1 for r in past if r in between)
        left = between.stop - number  # ``number`` and the rounds between after it
        return Fraction(min(max(wanted - kept, 0), left), left)
    pairs = _pairs(rounds, number - 1, set(past))
    total = sum(chance for _, _, chance in pairs)
    if not total:
        return Fraction(0)
    return sum(chance for first, last, chance in pairs if number in (first, last)) / total


def impossible_draw(rounds: int, done: int, past: Iterable[int]) -> str | None:
    """Why ``past``, the rounds audited among timed rounds 1 to ``done`` of ``rounds``, is
    not what a draw can have decided up to there, or None when it is."""
    past = sorted(past)
    if any(not 1 <= r <= done for r in past) or len(set(past)) != len(past):
        return f"audited rounds {past}: not each once among timed rounds 1 to {done}"
    if rounds < 2:
        return (
            None
            if past == list(range(1, done + 1))
            else f"audited rounds {past}: {rounds} round(s) are all audited"
        )
    _, _, between = _windows(rounds)
    wanted = min(rounds // AUDIT_EVERY, len(between))
    kept = sum(1 for r in past if r in between)
    left = len(range(max(done + 1, between.start), between.stop))
    if not _pairs(rounds, done, set(past)) or kept > wanted or wanted - kept > left:
        return (
            f"audited rounds {past} up to timed round {done} of {rounds}: not a draw of the "
            f"audited rounds (one among the first ten, another among the last ten, {wanted} "
            "between)"
        )
    return None


def whole_draw(rounds: int, generator: random.Random) -> tuple[int, ...]:
    """A whole test's audited rounds at once, as the round-by-round decisions give them (one
    uniform in the first window, another uniform among the rest of the last, the rounds
    between a uniform sample): for what the suite estimates of its audits, never for a
    test's own draw, which is ``AuditDraw``'s."""
    if rounds < 2:
        return tuple(range(1, rounds + 1))
    first_window, last_window, between = _windows(rounds)
    first = generator.choice(first_window)
    last = generator.choice([r for r in last_window if r != first])
    more = generator.sample(between, min(rounds // AUDIT_EVERY, len(between)))
    return tuple(sorted({first, last, *more}))


class AuditDraw:
    """The decisions of one test's audits, round by round: ``decide(number)`` is called
    after round ``number`` delivered its results, and holds nothing of any later round.

    Args:
        rounds: the test's timed rounds.
        past: the rounds already audited (a resumed test's, up to its boundary).
        randomness: the operating system's (``random.SystemRandom``, which keeps no state
            to read) unless a unit test gives a seeded generator.
    """

    def __init__(
        self, rounds: int, past: Iterable[int] = (), randomness: random.Random | None = None
    ) -> None:
        self.rounds = rounds
        self.past = list(past)
        self.randomness = randomness or random.SystemRandom()

    def decide(self, number: int) -> bool:
        """Whether timed round ``number``, which has delivered, is audited."""
        chance = audit_chance(self.rounds, number, self.past)
        audited = self.randomness.randrange(chance.denominator) < chance.numerator
        if audited:
            self.past.append(number)
        return audited
