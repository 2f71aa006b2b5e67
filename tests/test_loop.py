"""One test's loop (``performance/loop.py``): its clock, what it tells its caller between
rounds, and the record it ends with (pytest-benchmark's view of its rounds:
tests/test_benchmark_runs.py, the quick run)."""

import cProfile
import gc
import pstats
import sys

import pytest
from gost_helpers import SMALL_PLAN, Scripted

from pytest_gostcnn.backends.numpy import NumpyBackend
from pytest_gostcnn.performance.loop import Clock, record_of, run
from pytest_gostcnn.performance.plan import Plan
from pytest_gostcnn.performance.record import Passed, Record
from pytest_gostcnn.performance.rounds import Rounds, TimedTest


class Watched(NumpyBackend):
    """A correct backend that notes, at each call, whether the collector was on and whether
    it is inside a call (which the loop's caller must never see)."""

    def __init__(self, dtype):
        super().__init__(dtype)
        self.calls, self.collector, self.inside = 0, [], False

    def _call(self, run, *arguments):
        self.inside = True
        self.calls += 1
        self.collector.append(gc.isenabled())
        try:
            return run(*arguments)
        finally:
            self.inside = False

    def infer(self, *arguments):
        return self._call(super().infer, *arguments)

    def train(self, *arguments):
        return self._call(super().train, *arguments)


class Ticks:
    """A clock that advances ``step`` s at every reading."""

    def __init__(self, step):
        self.now, self.step = 0.0, step

    def __call__(self):
        self.now += self.step
        return self.now


def test_each_timed_round_is_timed_with_the_clock_given_and_the_warm_up_is_not(
    shipped_networks,
):
    backend = Watched("float32")
    test = TimedTest(backend, shipped_networks["Sh"], "inference", SMALL_PLAN, seed=3)
    record = record_of(run(Rounds(test), Clock(Ticks(0.25))))

    assert isinstance(record, Record)
    assert record.round_seconds == (0.25,) * SMALL_PLAN.rounds
    assert record.seconds_now == record.round_seconds and record.resumed_rounds == 0
    assert record.error is None and len(record.fingerprints) == SMALL_PLAN.rounds


@pytest.mark.parametrize("off", [False, True])
def test_the_collector_is_off_only_while_a_round_is_timed_when_asked(shipped_networks, off):
    backend = Watched("float32")
    test = TimedTest(backend, shipped_networks["Sh"], "inference", SMALL_PLAN, seed=3)
    rounds = Rounds(test)
    backend.collector.clear()  # the probe's calls
    record_of(run(rounds, Clock(collector_off=off)))

    assert backend.collector == [not off] * (SMALL_PLAN.warmup_rounds + SMALL_PLAN.rounds)
    assert gc.isenabled()


@pytest.mark.parametrize("mode", ["inference", "training"])
def test_the_caller_hears_of_each_round_between_rounds_and_of_boundaries_with_their_share(
    shipped_networks, mode
):
    backend = Watched("float32")
    plan = Plan(None, 20, 1, 1, 20)
    test = TimedTest(backend, shipped_networks["Sh"], mode, plan, seed=3, unit_rounds=1)
    rounds = Rounds(test)
    rounds.draw = Scripted((16, 17))  # a check just before a boundary and just after it
    seen = []
    for event in run(rounds, Clock(Ticks(1.0))):
        assert not backend.inside  # no round is running while the caller has the event
        seen.append(event)

    passed = [event for event in seen if isinstance(event, Passed)]
    assert [p.done for p in passed] == list(range(1, 21)) and {p.rounds for p in passed} == {20}
    (boundary,) = [p for p in passed if p.boundary is not None]  # 16, never the test's last
    assert boundary.done == boundary.boundary.done == 16 and boundary.boundary.rounds == 20
    # The share holds the rounds so far, and the check of round 16 already made.
    assert boundary.share.round_seconds == (1.0,) * 16
    assert [a.round for a in boundary.share.checks] == [16]
    record = seen[-1]
    assert isinstance(record, Record) and [a.round for a in record.checks] == [16, 17]
    # What the report states of the test's data: training's unit and its copies' share.
    rules = record.data_rules
    if mode == "training":
        assert rules["unit_rounds"] == 1 and rules["segment_rounds"] == 16
        assert rules["copy_share"] is not None and rules["residual_scale"] > 0
    else:
        assert set(rules.values()) == {None}


def test_a_failed_backend_passes_its_boundaries_with_no_share(shipped_networks):
    class FailsAtRound3(NumpyBackend):
        calls = 0

        def infer(self, *arguments):
            self.calls += 1
            if self.calls == 5:  # the probe's, the warm-up's, rounds 1 and 2, then 3
                raise RuntimeError("device lost")
            return super().infer(*arguments)

    backend = FailsAtRound3("float32")
    plan = Plan(None, 20, 1, 1, 20)
    test = TimedTest(backend, shipped_networks["Sh"], "inference", plan, seed=3)
    events = list(run(Rounds(test)))

    (boundary,) = [e for e in events if isinstance(e, Passed) and e.boundary is not None]
    assert boundary.share is None  # nothing to go on from; every cell still meets there
    assert "device lost" in events[-1].error


def test_a_profiled_round_runs_after_the_rounds_neither_timed_nor_checked(shipped_networks):
    backend = Watched("float32")
    test = TimedTest(backend, shipped_networks["Sh"], "inference", SMALL_PLAN, seed=3)
    rounds = Rounds(test)
    rounds.draw = Scripted(range(1, 10))  # every round checked
    backend.calls = 0
    profile = cProfile.Profile()
    record = record_of(run(rounds, Clock(profile=profile)))

    assert backend.calls == SMALL_PLAN.warmup_rounds + SMALL_PLAN.rounds + 1
    assert len(record.round_seconds) == len(record.checks) == SMALL_PLAN.rounds
    profiled = {name for _, _, name in pstats.Stats(profile).stats}
    assert "infer" in profiled


def test_a_tracer_does_not_run_inside_a_timed_round_and_is_back_after_it():
    # A coverage tracer or a debugger would slow the round it traced: the clock pauses it,
    # as pytest-benchmark's runner did, and gives it back.
    seen = []

    def tracer(frame, event, argument):
        seen.append(frame.f_code.co_name)
        return None

    def work():
        seen.append(("inside", sys.gettrace() is None))

    sys.settrace(tracer)
    try:
        Clock().time(work, ())
        after = sys.gettrace()
    finally:
        sys.settrace(None)
    assert ("inside", True) in seen and "work" not in seen
    assert after is tracer


def test_a_run_without_checkpoints_passes_its_boundaries_without_building_a_share(
    shipped_networks,
):
    plan = Plan(None, 20, 1, 1, 20)
    test = TimedTest(NumpyBackend("float32"), shipped_networks["Sh"], "inference", plan, seed=3)
    events = list(run(Rounds(test), checkpoints=False))

    passed = [event for event in events if isinstance(event, Passed)]
    assert len(passed) == 20 and all(p.boundary is None and p.share is None for p in passed)
