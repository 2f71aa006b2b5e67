"""Which timed rounds of a test are audited (standard.md §7.7): drawn where no backend can
see, and drawn again, from the same distribution given the past, for a test resumed from a
checkpoint inside it.
"""

from __future__ import annotations

import random
from collections.abc import Iterable

# Audited rounds: one among the first AUDIT_WINDOW timed rounds, another among the last
# AUDIT_WINDOW, and one more anywhere between per AUDIT_EVERY rounds of a long run.
AUDIT_WINDOW = 10
AUDIT_EVERY = 10_000


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


def audited_after(
    rounds: int, done: int, past: Iterable[int], draw: random.Random
) -> tuple[int, ...]:
    """The audited rounds after timed round ``done`` of a test whose rounds up to ``done``
    were drawn ``past`` (a stopped test resumed): drawn as ``audited_rounds`` would, given
    what it drew up to ``done`` (the draw's own distribution, conditioned on its past).
    ValueError when no draw of ``audited_rounds`` has that past.

    Only the past is kept in a checkpoint (the rounds already audited, which the report
    shows anyway); the future is drawn again here, from ``draw``, so nothing written down
    tells which of the rounds still to run will be audited.
    """
    past = set(past)
    if any(not 1 <= r <= done for r in past):
        raise ValueError(f"audited rounds {sorted(past)}: not all among timed rounds 1 to {done}")
    if rounds < 2:
        if past != {r for r in range(1, rounds + 1) if r <= done}:
            raise ValueError(f"audited rounds {sorted(past)}: a test of {rounds} audits all")
        return tuple(r for r in range(1, rounds + 1) if r > done)
    window = range(1, min(AUDIT_WINDOW, rounds) + 1)
    last_window = range(max(1, rounds - AUDIT_WINDOW + 1), rounds + 1)
    between = range(AUDIT_WINDOW + 1, rounds - AUDIT_WINDOW + 1)
    seen = past - set(between)
    # (first, last) as audited_rounds draws them, each pair with its probability, that
    # agree with what was drawn up to ``done``.
    pairs, weights = [], []
    for first in window:
        for last in last_window:
            if last != first and {r for r in (first, last) if r <= done} == seen:
                pairs.append((first, last))
                weights.append(1.0 / (len(window) * (len(last_window) - (first in last_window))))
    kept = len(past & set(between))
    wanted = min(rounds // AUDIT_EVERY, len(between))
    left = [r for r in between if r > done]
    if not pairs or kept > wanted or wanted - kept > len(left):
        raise ValueError(
            f"audited rounds {sorted(past)} up to timed round {done} of {rounds}: not a "
            "draw of the audited rounds (one among the first ten, another among the last "
            f"ten, {wanted} between)"
        )
    first, last = draw.choices(pairs, weights)[0]
    more = draw.sample(left, wanted - kept)
    return tuple(sorted({r for r in (first, last) if r > done} | set(more)))
