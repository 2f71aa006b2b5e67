"""Whether other work shared the cell during a test's timed rounds
(performance/contention.py): the threads' waiting for a core, counted by Linux, over the
time they were ready to run; past SHARED_LIMIT the cell was shared."""

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


def test_the_shares_are_the_waiting_over_the_ready_time_and_the_cpu_over_the_cores():
    measured = Contention(
        wall_seconds=2.0, cpu_seconds=3.0, cores=2, wait_seconds=1.0, load_average=3.5
    )
    assert measured.wait_share == pytest.approx(0.25)  # 1 s waiting of 4 s ready
    assert measured.cpu_share == pytest.approx(0.75)  # 3 s of 2 s x 2 cores
    assert measured.shared


def test_a_cell_is_shared_only_past_the_limit_and_never_when_not_measured():
    at_limit = Contention(1.0, 1.0 - SHARED_LIMIT, 1, SHARED_LIMIT, None)
    assert at_limit.wait_share == pytest.approx(SHARED_LIMIT) and not at_limit.shared
    assert not Contention(1.0, 1.0, 1, None, None).shared


def test_a_contention_read_back_recomputes_what_it_derived():
    measured = Contention(2.0, 3.0, 2, 1.0, 3.5)
    written = {**measured.as_dict(), "shared": False, "wait_share": 0.0}
    assert Contention.from_dict(written) == measured
    assert Contention.from_dict(written).as_dict() == measured.as_dict()


def test_the_description_names_the_wait_the_cpu_and_the_load():
    text = Contention(2.0, 3.0, 2, 1.0, 3.5).describe()
    assert (
        text == "waited for a core 25 % of its ready time (CPU 75 % of 2 cores; load average 3.5)"
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


@pytest.mark.skipif(waited_seconds() is None, reason="the system counts no waiting")
def test_a_busy_process_on_the_cells_one_core_makes_the_rounds_wait_for_it():
    cores = os.sched_getaffinity(0)
    core = {min(cores)}
    os.sched_setaffinity(0, core)
    busy = subprocess.Popen([sys.executable, "-c", "while 1: pass"])
    try:
        os.sched_setaffinity(busy.pid, core)
        time.sleep(0.05)
        meter = ContentionMeter()
        meter.start()
        end = time.process_time() + 0.1
        while time.process_time() < end:
            pass
        meter.stop()
    finally:
        busy.kill()
        busy.wait()
        os.sched_setaffinity(0, cores)
    measured = meter.contention()
    assert measured.cores == 1 and measured.shared, measured
