"""A stalled cell (docs/cells.md): the deadline of a round's barrier, the option that sets
it, and the barrier that names a cell that does not arrive, without MPI. The two-rank run
that ends a stalled job is in tests/test_cells.py."""

import time

import pytest
from gost_helpers import SMALL_PLAN, Scripted, run_rounds

from pytest_gostcnn.backends.numpy import NumpyBackend
from pytest_gostcnn.performance import rounds as rounds_module
from pytest_gostcnn.performance.cells import Cells, CellsError, Deadline
from pytest_gostcnn.performance.rounds import Links, Rounds, TimedTest
from pytest_gostcnn.performance.stall import (
    STALL_DEFAULT_SECONDS,
    STALL_FLOOR_SECONDS,
    stall_deadline,
)
from pytest_gostcnn.performance.timing import Check
from pytest_gostcnn.run.options import Options

# The deadline.


def test_after_the_warm_up_the_deadline_is_the_factor_times_its_round():
    deadline = stall_deadline(None, warmup_seconds=10.0)
    assert deadline.seconds == 20 * 10.0
    assert str(deadline) == "200 s (20 x the warm-up round's 10 s, at least 60 s)"


def test_a_fast_warm_up_gives_the_floor():
    assert stall_deadline(None, warmup_seconds=0.01).seconds == STALL_FLOOR_SECONDS


def test_before_the_warm_up_is_timed_the_deadline_is_the_default():
    assert stall_deadline(None, None) == Deadline(
        STALL_DEFAULT_SECONDS, "the default until the warm-up round is timed"
    )


@pytest.mark.parametrize("warmup_seconds", [None, 0.01, 10.0])
def test_the_option_sets_the_deadline_outright(warmup_seconds):
    assert stall_deadline(2.5, warmup_seconds) == Deadline(2.5, "--gost-stall-timeout")


# The option.


def test_the_option_takes_seconds():
    assert Options.parse({"stall_timeout": "2.5"}).stall_timeout == 2.5
    assert Options.parse({}).stall_timeout is None


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("soon", "--gost-stall-timeout=soon: not a number of seconds"),
        ("0", "--gost-stall-timeout=0: must be a finite number of seconds > 0"),
        ("-5", "--gost-stall-timeout=-5: must be a finite number of seconds > 0"),
        ("inf", "--gost-stall-timeout=inf: must be a finite number of seconds > 0"),
        ("nan", "--gost-stall-timeout=nan: must be a finite number of seconds > 0"),
    ],
)
def test_a_bad_stall_timeout_is_one_line_naming_it(text, says):
    with pytest.raises(ValueError, match=f"^{says}$"):
        Options.parse({"stall_timeout": text})


def test_a_rerun_on_one_cell_leaves_the_stall_timeout_out():
    assert Options.parse({"stall_timeout": "5"}).args() == Options.parse({}).args()


# The rounds: where each barrier is and how long it waits.


def met(shipped_networks, stall_timeout=None, checked=()) -> list[tuple[str, str]]:
    """The barriers one test's rounds meet, run by the suite's loop (``loop.run``):
    each one's deadline and what the cells were doing before it. The ``checked`` rounds'
    checks take 4 s on a clock that only they move."""
    barriers: list[tuple[str, str]] = []
    clock = [0.0]

    def judged(number, key, image, output):
        clock[0] += 4.0
        return Check(number, True, "correct", None, None, None)

    class Meeting:
        def meet(self, deadline, where, word=None):
            barriers.append((str(deadline), where))
            return word and word()

    rounds = Rounds(
        TimedTest(NumpyBackend("float32"), shipped_networks["Sh"], "inference", SMALL_PLAN, seed=3),
        Links(Meeting(), stall_timeout=stall_timeout),
    )
    rounds.draw = Scripted(checked) if checked else None
    rounds.checker.image = judged
    real = rounds_module.time.monotonic
    rounds_module.time.monotonic = lambda: real() + clock[0]
    try:
        run_rounds(rounds)
    finally:
        rounds_module.time.monotonic = real
    return barriers


def test_every_round_starts_at_a_barrier_and_the_last_ends_at_one(shipped_networks):
    assert [where for _, where in met(shipped_networks)] == [
        "preparing the warm-up round",
        "the warm-up round",
        "timed round 1 of 3",
        "timed round 2 of 3",
        "timed round 3 of 3",
    ]


def test_the_warm_up_round_gives_the_timed_rounds_deadline(shipped_networks):
    default = "1800 s (the default until the warm-up round is timed)"
    deadlines = [deadline for deadline, _ in met(shipped_networks)]
    # Sh's warm-up round takes milliseconds: the floor.
    assert deadlines[:2] == [default, default]
    assert all(d.startswith("60 s (20 x the warm-up round's ") for d in deadlines[2:])


def test_with_checks_the_cells_meet_after_each_timed_round_for_its_draw(shipped_networks):
    # The decision is drawn on cell 0 once every cell delivered, and given to all at a
    # watched barrier: a cell stalled in the round is named there, as before the next.
    assert [where for _, where in met(shipped_networks, checked=(2,))] == [
        "preparing the warm-up round",
        "the warm-up round",
        *[f"timed round {n} of 3" for n in (1, 1, 2, 2, 3, 3)],
    ]


def test_the_barrier_after_an_checked_round_waits_for_the_check_too(shipped_networks):
    # Every cell checks the same rounds (one draw for all, cell 0's, given at the barrier
    # after each round), so the others are checking too; a replay can outlast the floor.
    deadlines = [deadline for deadline, _ in met(shipped_networks, checked=(2,))]
    assert deadlines[4].startswith("60 s (20 x the warm-up round's ")  # round 2's draw
    seconds, source = deadlines[5].split(" s (", 1)
    assert float(seconds) == pytest.approx(60 + 20 * 4, abs=1)
    assert source.startswith("20 x the warm-up round's ")
    assert "plus 20 x this cell's 4" in source and source.endswith(" s check of the round)")
    assert deadlines[6].startswith("60 s (")


def test_the_option_is_every_rounds_deadline(shipped_networks):
    deadlines = {deadline for deadline, _ in met(shipped_networks, stall_timeout=7.0)}
    assert deadlines == {"7 s (--gost-stall-timeout)"}


# The watched barrier, over a communicator that delivers only the messages it is told to.


class Request:
    def __init__(self, complete: bool) -> None:
        self.complete = complete

    def test(self):
        return self.complete, None

    def wait(self):
        assert self.complete


class Communicator:
    def __init__(self, arrive: set[int]) -> None:
        self.arrive = arrive  # the cells whose messages reach this one

    def irecv(self, source: int, tag: int) -> Request:
        return Request(source in self.arrive)

    def isend(self, obj, dest: int, tag: int) -> Request:
        return Request(True)


def stall(cells: Cells, seconds: float = 0.05) -> tuple[str, float]:
    """What ``on_stall`` is told at a watched barrier, and after how long."""
    told: list[str] = []
    started = time.monotonic()
    with pytest.raises(CellsError):
        cells.watched_barrier(
            Deadline(seconds, "given"), "Sh inference, timed round 2", told.append
        )
    (message,) = told
    return message, time.monotonic() - started


def test_cell_0_names_every_cell_that_did_not_arrive():
    cells = Cells(rank=0, size=4, comm=Communicator(arrive={2}))
    message, waited = stall(cells)
    assert message == (
        "cells 1, 3 of 4 stalled in Sh inference, timed round 2: not at the barrier after it "
        "within 0.05 s (given)"
    )
    assert waited >= 0.05


def test_another_cell_names_cell_0_after_twice_the_deadline():
    cells = Cells(rank=2, size=4, comm=Communicator(arrive=set()))
    message, waited = stall(cells)
    assert message == (
        "cell 0 of 4 stalled in Sh inference, timed round 2: cell 2 waited for it at the "
        "barrier after it for twice the deadline of 0.05 s (given)"
    )
    assert waited >= 2 * 0.05


@pytest.mark.parametrize("rank", [0, 1, 2])
def test_when_every_cell_arrives_the_barrier_passes(rank):
    cells = Cells(rank=rank, size=3, comm=Communicator(arrive={0, 1, 2}))
    cells.watched_barrier(Deadline(0.05, "given"), "anywhere", pytest.fail)


def test_one_cell_has_no_barrier_to_wait_at():
    Cells().watched_barrier(Deadline(0.0, "given"), "anywhere", pytest.fail)
