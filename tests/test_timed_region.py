"""What a timed round times (docs/benchmarking.md): a round ends when its results are on the
host, training runs in segments from the drawn weights, and a check changes nothing the
backend sees until the checked round has ended.

Rounds are driven as pytest-benchmark drives them (setup, the timed target, teardown), the
target timed here; the ОРП of a backend whose work escapes the round is compared with the
plain NumPy backend's, measured in the same test, never with a wall time.
"""

import random
import statistics
import time
import warnings

import gost_test_backends as mutants
import numpy as np
import pytest
from gost_helpers import Scripted, directory, suite, swept

from pytest_gostcnn.backends.numpy import NumpyBackend
from pytest_gostcnn.conformance.verification import NOT_CORRECT, verify_network
from pytest_gostcnn.performance.plan import Plan
from pytest_gostcnn.performance.rounds import Links, Rounds, TimedTest
from pytest_gostcnn.performance.timing import CellTiming, Timing, macs_per_image
from pytest_gostcnn.performance.training_data import (
    RESIDUAL_SCALE,
    SEGMENT_ROUNDS,
)

FACTOR = 3.0  # generous: the machine is shared, the escape it guards against is 100x-1000x


def drive(backend, network, mode, run_plan, check=True, draw_seed=0, segment_rounds=None):
    """Every round of one test; returns the Rounds and each timed round's target seconds."""
    test = TimedTest(
        backend, network, mode, run_plan, seed=3, segment_rounds=segment_rounds, checked=check
    )
    rounds = Rounds(test, Links(randomness=random.Random(draw_seed)))
    seconds = []
    for call in range(run_plan.warmup_rounds + run_plan.rounds):
        arguments = rounds.setup()
        started = time.perf_counter()
        rounds.target(*arguments)
        if call >= run_plan.warmup_rounds:
            seconds.append(time.perf_counter() - started)
        rounds.teardown()
    assert rounds.error is None, rounds.error
    return rounds, seconds


def orp(network, mode, run_plan, seconds) -> float:
    """The test's ОРП against a notional peak (the same for both backends compared), from
    the median round: work that escapes a round escapes every round, a busy machine's
    hiccup only some."""
    median = statistics.median(seconds)
    cell = CellTiming(0, "cpu", run_plan.images, (median,) * len(seconds), None, "")
    timing = Timing(
        network.latin,
        mode,
        "float32",
        run_plan.batch,
        run_plan.rounds,
        macs_per_image(network, mode),
        (cell,),
    )
    return 100.0 * timing.macs_per_second / 1e12


# A round ends when its results are delivered.


@pytest.mark.parametrize("mode", ["inference", "training"])
@pytest.mark.parametrize(
    "mutant",
    [mutants.ComputesWhenRead, mutants.NoSynchronize, mutants.DefersEachStep],
    ids=lambda m: m.__name__,
)
def test_work_left_lazy_or_queued_is_timed_in_its_round(shipped_networks, mutant, mode):
    # М's training checks take 10 s a case: training on Ш (Sh), the smallest network.
    network = shipped_networks["M" if mode == "inference" else "Sh"]
    backend = mutant("float32")
    assert not verify_network(backend, network, mode, batch=1, seed=5).failed
    run_plan = Plan("quick", rounds=6, warmup_rounds=1, batch=1)

    plain = orp(
        network,
        mode,
        run_plan,
        drive(NumpyBackend("float32"), network, mode, run_plan, check=False)[1],
    )
    rounds, seconds = drive(backend, network, mode, run_plan)

    assert orp(network, mode, run_plan, seconds) < FACTOR * plain
    assert rounds.checks and all(a.passed for a in rounds.checks), rounds.checks


# Checks no backend can see coming.


class Recording(NumpyBackend):
    """Notes every call the suite makes on it."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.log = []

    def load_weights(self, network, host):
        self.log.append("load_weights")
        return super().load_weights(network, host)

    def to_device(self, host):
        self.log.append(("to_device", host.shape, host.tobytes()))
        return super().to_device(host)

    def to_host(self, array):
        self.log.append(("to_host", array.shape))
        return super().to_host(array)

    def train(self, network, weights, image, out_residual):
        self.log.append("train")
        return super().train(network, weights, image, out_residual)

    def synchronize(self):
        self.log.append("synchronize")


def _round_calls(network, checked, segment_rounds=2):
    """The backend's calls in each round's setup and timed target, with these rounds (units
    of one round) checked (every call of the teardown, where the check runs, left out); the
    rounds' data from one seeded generator, so that two runs hand over the same bytes."""
    backend = Recording("float32")
    run_plan = Plan("quick", rounds=6, warmup_rounds=1, batch=1)
    test = TimedTest(
        backend, network, "training", run_plan, 3, segment_rounds=segment_rounds, unit_rounds=1
    )
    rounds = Rounds(test, Links(randomness=random.Random(0)))
    rounds.draw = Scripted(checked)
    calls = []
    for _ in range(run_plan.warmup_rounds + run_plan.rounds):
        backend.log = []
        arguments = rounds.setup()
        rounds.target(*arguments)
        calls.append(list(backend.log))
        rounds.teardown()
    assert [a.round for a in rounds.checks] == list(checked)
    assert all(a.passed for a in rounds.checks), rounds.checks
    return calls


def test_no_call_before_or_in_a_round_tells_a_checked_one(shipped_networks):
    network = shipped_networks["Sh"]
    unchecked = _round_calls(network, ())
    checked = _round_calls(network, (1, 3))

    assert checked == unchecked
    # The weights are loaded again before timed rounds 1, 3, 5 (segments of 2), checked or not.
    assert [("load_weights" in calls) for calls in unchecked] == [
        False,
        True,
        False,
        True,
        False,
        True,
        False,
    ]
    # Each round reads its output alone: the suite copies the input residual and (units
    # of one round) the weights itself, on the device, and waits for its copies (a second
    # synchronize); the warm-up times four copies, the first two filling the buffers the
    # rounds reuse.
    reads = [sum(1 for c in calls if c[0] == "to_host") for calls in unchecked]
    assert reads == [1] * 7
    waits = [calls.count("synchronize") for calls in unchecked]
    assert waits == [1 + 4] + [2] * 6


def test_a_rounds_data_is_handed_over_inside_its_timed_region_from_its_own_key(
    shipped_networks,
):
    # The setup makes the host arrays from a key drawn then; the backend sees them only in
    # the timed target, the residual and the images as the key rebuilds them.
    network = shipped_networks["Sh"]
    backend = Recording("float32")
    run_plan = Plan("quick", rounds=3, warmup_rounds=1, batch=2)
    rounds = Rounds(TimedTest(backend, network, "training", run_plan, seed=3, cell=1))
    keys = set()
    for _ in range(4):
        backend.log = []
        arguments = rounds.setup()
        assert backend.log == []  # nothing handed over untimed
        rounds.target(*arguments)
        sent = {c[1]: c[2] for c in backend.log if c[0] == "to_device"}
        residual = rounds.checker.out_residual(rounds.key)
        assert sent[residual.shape] == residual.tobytes()
        images = rounds.checker.images(rounds.key)
        assert sent[images.shape] == images.tobytes()
        keys.add(rounds.key)
        rounds.teardown()
    assert len(keys) == 4  # a fresh key every round
    assert np.abs(rounds.checker.out_residual(7)).max() <= RESIDUAL_SCALE


@pytest.mark.parametrize(
    "mutant",
    [mutants.HonestWhenWatched, mutants.SkipsUpdateUnlessWatched],
    ids=lambda m: m.__name__,
)
def test_a_backend_honest_only_when_watched_fails_an_check(shipped_networks, mutant):
    network = shipped_networks["Sh"]
    backend = mutant("float32")
    assert not verify_network(backend, network, "training", batch=1, seed=5).failed
    run_plan = Plan("quick", rounds=4, warmup_rounds=1, batch=1)

    rounds, _ = drive(backend, network, "training", run_plan)

    failed = [a for a in rounds.checks if not a.passed]
    assert failed and failed[0].verdict == NOT_CORRECT, rounds.checks


# A correct backend through many segments.


# The four largest analogs take half a minute to a minute each here; GOST_SWEEP=all runs them
# (the tiny-table run below takes every network through 13 segments in CI).
@pytest.mark.parametrize("latin", ["M", "Sh", *(swept(latin) for latin in ("S", "G", "R", "V"))])
def test_a_correct_backend_passes_checks_across_segments_on_every_network(shipped_networks, latin):
    network = shipped_networks[latin]
    run_plan = Plan("quick", rounds=5, warmup_rounds=1, batch=1)
    backend = NumpyBackend("float32")
    rounds = Rounds(
        TimedTest(backend, network, "training", run_plan, seed=3, segment_rounds=2, unit_rounds=2)
    )
    rounds.draw = Scripted((1, 2, 3))  # every segment: rounds 1-2, 3-4 and 5
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no overflow, no invalid value
        for _ in range(run_plan.warmup_rounds + run_plan.rounds):
            arguments = rounds.setup()
            rounds.target(*arguments)
            rounds.teardown()
    assert rounds.error is None, rounds.error
    assert [(a.round, a.rounds) for a in rounds.checks] == [(1, 2), (3, 2), (5, 1)]
    assert all(a.passed and a.worst_ratio < 1 for a in rounds.checks), rounds.checks


def test_a_long_training_run_on_tiny_tables_passes_every_check(tmp_path):
    # 13 segments of 16 rounds at B = 2; overflow and invalid values fail the run.
    run = suite(
        directory(tmp_path),
        "--gost-backend=numpy",
        "--gost-tables=tiny",
        "--gost-mode=training",
        "--gost-batch=2",
        "--gost-images=400",
        "-W",
        "error::RuntimeWarning",
    )
    assert run.returncode == 0, run.stdout[-3000:]
    tests = run.report["benchmarks"]
    assert len(tests) == 6
    for test in tests:
        assert test["rounds"] == 200 and test["segment_rounds"] == SEGMENT_ROUNDS
        assert test["residual_scale"] == RESIDUAL_SCALE
        checks = [a for cell in test["cells"] for a in cell["checks"]]
        assert len(checks) >= 2 and all(a["passed"] for a in checks), checks
