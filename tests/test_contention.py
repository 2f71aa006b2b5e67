"""Whether other work shared the cell during a test's timed rounds
(performance/contention.py): the most one of the test's threads waited for a core, counted
by Linux, over the rounds' wall time; past SHARED_LIMIT the cell was shared."""

import os
import subprocess
import sys
import time

import pytest

from pytest_gostcnn.performance import contention
from pytest_gostcnn.performance.contention import (
    SHARED_LIMIT,
    Contention,
    ContentionMeter,
    waited_seconds,
)


def test_the_shares_are_the_delay_over_the_wall_time_and_the_cpu_over_the_cores():
    measured = Contention(
        wall_seconds=2.0,
        cpu_seconds=3.0,
        cores=2,
        wait_seconds=1.0,
        load_average=3.5,
        delay_seconds=0.6,
    )
    assert measured.delay_share == pytest.approx(0.3)  # one thread waited 0.6 s of 2 s
    assert measured.wait_share == pytest.approx(0.25)  # all waited 1 s of 4 s ready
    assert measured.cpu_share == pytest.approx(0.75)  # 3 s of 2 s x 2 cores
    assert measured.shared


def test_a_cell_is_shared_only_past_the_limit_and_never_when_not_measured():
    at_limit = Contention(1.0, 1.0, 1, SHARED_LIMIT, None, SHARED_LIMIT)
    assert at_limit.delay_share == pytest.approx(SHARED_LIMIT) and not at_limit.shared
    assert not Contention(1.0, 1.0, 1, None, None).shared


def test_a_sleeping_thread_woken_late_is_no_delay_though_its_ready_time_was_mostly_waiting():
    # Counted on this project's 2-core machine, nothing else running: rounds of five 2 ms
    # sleeps (a GPU backend's host thread), 40 rounds. Of its ready time the thread waited
    # 15 %, the measure before; of the rounds' time, 0.4 %.
    asleep = Contention(0.428, 0.009, 2, 0.0016, 0.1, 0.0016)
    assert asleep.wait_share > SHARED_LIMIT
    assert asleep.delay_share < SHARED_LIMIT / 10 and not asleep.shared


def test_a_contention_read_back_recomputes_what_it_derived():
    measured = Contention(2.0, 3.0, 2, 1.0, 3.5, 0.6)
    written = {**measured.as_dict(), "shared": False, "delay_share": 0.0}
    assert Contention.from_dict(written) == measured
    assert Contention.from_dict(written).as_dict() == measured.as_dict()


def test_a_report_that_predates_the_delay_is_judged_as_it_was_by_the_ready_time():
    written = Contention(2.0, 3.0, 2, 1.0, 3.5, 0.6).as_dict()
    del written["delay_seconds"], written["delay_share"]
    earlier = Contention.from_dict(written)
    assert earlier.delay_share is None and earlier.judged_share == pytest.approx(0.25)
    assert earlier.shared and "25 % of its ready time" in earlier.describe()


def test_the_description_names_the_delay_the_cpu_and_the_load():
    text = Contention(2.0, 3.0, 2, 1.0, 3.5, 0.6).describe()
    assert text == (
        "a thread waited for a core 30 % of the rounds' time (CPU 75 % of 2 cores; "
        "load average 3.5)"
    )
    assert "not measured" in Contention(2.0, 3.0, 2, None, None).describe()


def test_the_meter_counts_only_between_start_and_stop(monkeypatch):
    waits = iter([{1: 0.0}, {1: 0.0, 2: 5.0}, {1: 0.5, 2: 5.25, 3: 9.0}, {1: 0.5}, {1: 0.75}])
    monkeypatch.setattr(contention, "waited_seconds", lambda tasks: next(waits))
    meter = ContentionMeter()  # asks once whether the system counts it
    meter.start()
    meter.stop()  # threads 1 and 2 waited 0.5 + 0.25 s; thread 3 began meanwhile
    meter.start()
    meter.stop()  # thread 1 waited 0.25 s more
    assert meter.contention().wait_seconds == pytest.approx(1.0)


def test_the_meter_says_not_measured_where_the_system_counts_no_waiting(monkeypatch):
    monkeypatch.setattr(contention, "waited_seconds", lambda tasks: None)
    meter = ContentionMeter()
    meter.start()
    meter.stop()
    assert meter.contention().wait_seconds is None and not meter.contention().shared


def test_the_delay_is_the_thread_that_waited_most_and_a_resumed_test_adds_its_own(monkeypatch):
    counts = [{1: 0.0}, {1: 0.0, 2: 0.0}, {1: 0.25, 2: 0.5}, {1: 0.25, 2: 0.5}, {1: 0.75, 2: 0.5}]
    waits = iter(counts)  # the first: the meter asks whether the system counts it
    monkeypatch.setattr(contention, "waited_seconds", lambda tasks: next(waits))
    earlier = Contention(1.0, 1.0, 1, 0.5, None, 0.25)  # a checkpoint's counts
    meter = ContentionMeter(earlier=earlier)
    for _ in range(2):
        meter.start()
        meter.stop()  # thread 1 waits 0.25 s, then 0.5 s; thread 2, 0.5 s
    measured = meter.contention()
    assert measured.wait_seconds == pytest.approx(0.5 + 1.25)
    assert measured.delay_seconds == pytest.approx(0.25 + 0.75)  # thread 1's, after the 0.25


def _rounds(spin: float, sleep: float, rounds: int) -> Contention:
    """``rounds`` timed rounds, each ``spin`` seconds of CPU work then a ``sleep``."""
    meter = ContentionMeter()
    for _ in range(rounds):
        meter.start()
        end = time.process_time() + spin
        while time.process_time() < end:
            pass
        time.sleep(sleep)
        meter.stop()
    return meter.contention()


measured_here = pytest.mark.skipif(waited_seconds() is None, reason="the system counts no waiting")


@measured_here
def test_a_backend_that_sleeps_in_its_rounds_is_not_shared_though_the_old_measure_may_say_so():
    # A GPU backend's host thread: 50 ms asleep a round, nearly no CPU. Woken, it waits for a
    # core a moment: a large share of its little ready time (the measure before: up to 75 %
    # on this project's 2-core machine, 88 to 96 % beside two busy loops), a sliver of the
    # rounds' (20 ms rounds: under 5 % beside the busy loops, 10 % once at load 6, which
    # a wake-up's wait does not grow with the sleep).
    asleep = _rounds(spin=0.0, sleep=0.05, rounds=6)
    assert asleep.cpu_share < 0.1 and not asleep.shared, asleep


@measured_here
def test_a_backend_beside_two_busy_loops_on_its_core_is_shared():
    cores = os.sched_getaffinity(0)
    core = {min(cores)}
    os.sched_setaffinity(0, core)
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        for loop in busy:
            os.sched_setaffinity(loop.pid, core)
        time.sleep(0.05)
        measured = _rounds(spin=0.005, sleep=0.002, rounds=20)  # computes, then waits on a device
    finally:
        for loop in busy:
            loop.kill()
            loop.wait()
        os.sched_setaffinity(0, cores)
    assert measured.cores == 1 and measured.shared, measured
