"""A stalled cell (docs/cells.md): how long a cell waits for the others at a round's barrier.

With several cells, each round starts at a watched barrier (``cells.Cells``), and a cell
that has not reached it by the deadline ends the job.
"""

from __future__ import annotations

from .cells import Deadline

# The rounds of a test do the same work as its warm-up round, so a cell that takes
# STALL_FACTOR times as long is not running; the floor leaves room for what has nothing to
# do with the round (a busy node's scheduler, paging, a collector's pause). Before the
# warm-up has given a rate (loading the weights, the warm-up round, which may compile a GPU
# backend's kernels) the deadline is the default, or --gost-stall-timeout, which sets every
# deadline outright.
STALL_FACTOR = 20
STALL_FLOOR_SECONDS = 60.0
STALL_DEFAULT_SECONDS = 1800.0


def stall_deadline(
    stall_timeout: float | None,
    warmup_seconds: float | None,
    check_seconds: float | None = None,
) -> Deadline:
    """How long a cell waits at a round's barrier for the others: ``--gost-stall-timeout``
    when given, else the default until the warm-up round has been timed, then
    ``STALL_FACTOR`` times it (from the barrier before it to the one after), at least
    ``STALL_FLOOR_SECONDS``.

    After a checked round, plus ``STALL_FACTOR`` times this cell's ``check_seconds`` of it:
    every cell checks the same rounds (the plugin gives every cell one draw), and a replay
    from the segment's start can outlast many rounds."""
    if stall_timeout is not None:
        return Deadline(stall_timeout, "--gost-stall-timeout")
    if warmup_seconds is None:
        deadline = Deadline(STALL_DEFAULT_SECONDS, "the default until the warm-up round is timed")
    else:
        deadline = Deadline(
            max(STALL_FLOOR_SECONDS, STALL_FACTOR * warmup_seconds),
            f"{STALL_FACTOR} x the warm-up round's {warmup_seconds:.3g} s, at least "
            f"{STALL_FLOOR_SECONDS:g} s",
        )
    if check_seconds is None:
        return deadline
    return Deadline(
        deadline.seconds + STALL_FACTOR * check_seconds,
        f"{deadline.source}, plus {STALL_FACTOR} x this cell's {check_seconds:.3g} s check of "
        "the round",
    )
