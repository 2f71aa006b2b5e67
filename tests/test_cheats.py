"""Backends that want a better number (docs/standard.md §7.7, fifth release), each failing
through the guard it breaks: the checks' chance, the same for every round and drawn after
it delivered; the hand-over of a round's data inside its timed region; the probe under the
peak.

The rounds are driven as pytest-benchmark drives them, on the tiny tables where a test needs
hundreds of rounds for its chance to fall below 1, with a seeded draw (each cheat's own
generator is seeded too), so that every run here is the same; how often each random cheat
passes a draw of the operating system's is measured by ``benchmarks/check_power.py``
(docs/benchmarking.md, "What the checks catch").
"""

import random
import time

import gost_test_backends as mutants
import pytest
from gost_helpers import directory, run_rounds, suite

from pytest_gostcnn.backends.numpy import NumpyBackend
from pytest_gostcnn.conformance.verification import NOT_CORRECT, verify_network
from pytest_gostcnn.judgement.compliance import ReasonKind
from pytest_gostcnn.judgement.result import no_result
from pytest_gostcnn.machine.peak import Peak
from pytest_gostcnn.model.table_files import load_networks
from pytest_gostcnn.performance.plan import Plan
from pytest_gostcnn.performance.rounds import Links, Rounds, TimedTest
from pytest_gostcnn.performance.timing import CellTiming, Timing, macs_per_image


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return load_networks(directory(tmp_path_factory.mktemp("tables")) / "tiny")["Sh"]


def timed(backend, network, mode, rounds, batch=1, seed=0, segment_rounds=None):
    """Every round of one test, the warm-up first, through the suite's loop, and
    the seconds of each timed target."""
    run_plan = Plan(None, rounds, 1, batch, rounds * batch)
    test = TimedTest(backend, network, mode, run_plan, seed=3, segment_rounds=segment_rounds)
    loop = Rounds(test, Links(randomness=random.Random(seed)))
    return run_rounds(loop)


def verified(mutant, network, mode):
    backend = mutant("float32")
    assert not verify_network(backend, network, mode, batch=1, seed=5).failed
    return backend


def failed_check(loop):
    failed = [a for a in loop.checks if not a.passed]
    assert failed, loop.checks
    assert failed[0].verdict == NOT_CORRECT, failed[0]
    return failed[0]


# Cheats between the rounds a fixed count of checks would look at.


@pytest.mark.parametrize("mode", ["inference", "training"])
def test_a_backend_that_skips_the_middle_rounds_fails_a_check(tiny, mode):
    # 200 rounds: an earlier release checked one among the first ten, one among the last
    # ten and none between; now every round (segment) may be the one checked.
    backend = verified(mutants.SkipsTheMiddle, tiny, mode)

    loop = timed(backend, tiny, mode, 200)

    assert loop.draw.chance < 1 or mode == "training"  # inference: 0.9 a round
    assert backend.skipped and failed_check(loop).last_round > 10


def test_a_backend_that_reads_the_draw_learns_nothing_and_fails_a_check(tiny):
    # Every round's chance is the same (0.9 here) and decided after it delivered: the
    # lowest chance it can read is every round's, and skipping there is skipping all.
    backend = verified(mutants.ReadsTheDraw, tiny, "inference")

    loop = timed(backend, tiny, "inference", 200)

    assert 0 < loop.draw.chance < 1 and len(backend.skipped) > 1
    assert failed_check(loop).round in backend.skipped


@pytest.mark.parametrize(
    ("mutant", "mode", "rounds"),
    [
        (mutants.SkipsTwoPercent, "inference", 100),
        (mutants.Float16FivePercent, "inference", 100),
        (mutants.DropsFivePercentOfUpdates, "training", 200),
    ],
    ids=lambda v: v if isinstance(v, str | int) else v.__name__,
)
def test_a_backend_that_cheats_in_a_random_few_rounds_fails_a_check(tiny, mutant, mode, rounds):
    # The check that fails judges a round cheated in: a training unit replays from the
    # weights the backend held, so only the unit whose update was left out differs (the
    # rate over runs is benchmarks/check_power.py's).
    backend = verified(mutant, tiny, mode)

    loop = timed(backend, tiny, mode, rounds)

    assert backend.skipped, "the cheat's seeded generator cheats at least once here"
    first = failed_check(loop)
    assert any(first.round <= skipped <= first.last_round for skipped in backend.skipped)


def test_the_honest_backend_passes_the_same_tests(tiny):
    for mode, rounds in (("inference", 200), ("training", 200)):
        loop = timed(NumpyBackend("float32"), tiny, mode, rounds)
        assert loop.checks and all(a.passed for a in loop.checks), loop.checks


# Work where no clock runs.


@pytest.mark.parametrize("mutant", [mutants.WorksInToDevice, mutants.WorksInEveryOtherToDevice])
def test_work_done_while_the_data_is_handed_over_is_timed_with_the_round(shipped_networks, mutant):
    # The network run inside to_device: an earlier release handed the images over in the
    # untimed setup, and such a backend passed at twice (every other round) to a thousand
    # times (every round) its rate. Now the hand-over is the timed region's: each round that
    # worked there is timed for that work.
    network = shipped_networks["Sh"]
    backend = verified(mutant, network, "inference")
    run_plan = Plan(None, 4, 1, 1, 4)
    loop = Rounds(TimedTest(backend, network, "inference", run_plan, seed=3))
    timed_seconds, worked = [], []
    for call in range(run_plan.warmup_rounds + run_plan.rounds):
        arguments = loop.setup()
        before = len(backend.worked)
        started = time.perf_counter()
        loop.target(*arguments)
        seconds = time.perf_counter() - started
        if call and len(backend.worked) > before:
            timed_seconds.append(seconds)
            worked.append(backend.worked[-1])
        loop.teardown()
    assert worked and len(worked) == (4 if mutant.every == 1 else 2)
    assert all(t >= w for t, w in zip(timed_seconds, worked, strict=True))
    assert all(a.passed for a in loop.checks)  # its answers are right: only its time was wrong


def test_a_backend_that_computes_its_segment_when_its_weights_are_reloaded_fails_a_check(
    shipped_networks,
):
    # The next rounds' data are drawn in their setups from randomness nobody holds: the
    # best a backend can do at the reload is guess, and a segment answered from a guess
    # fails its check.
    network = shipped_networks["Sh"]
    backend = verified(mutants.ComputesItsSegmentAhead, network, "training")

    loop = timed(backend, network, "training", 4, segment_rounds=2)

    assert failed_check(loop).round == 1


# A peak below what the backend is measured to do.


def test_a_peak_below_the_probes_rate_is_no_result(shipped_networks):
    network = shipped_networks["Sh"]
    backend = NumpyBackend("float32")
    loop = Rounds(TimedTest(backend, network, "inference", Plan(None, 3, 1, 1, 3), seed=3))
    measured = loop.probe
    macs = macs_per_image(network, "inference")

    def timing(peak):  # 1000 s a round: its ОРП far below 100 % at either peak
        cell = CellTiming(0, "cpu", 3, (1e3,) * 3, peak, "", probe=measured)
        return Timing("Sh", "inference", "float32", 1, 3, macs, (cell,))

    (reason,) = no_result(timing(Peak(measured.macs_per_second / 2, "given (--gost-peak)")))
    assert reason.kind is ReasonKind.PEAK_BELOW_PROBE
    assert f"row {measured.row}" in reason.text and "given (--gost-peak)" in reason.text
    assert no_result(timing(Peak(2 * measured.macs_per_second, "given (--gost-peak)"))) == []


def test_the_suite_fails_a_test_whose_given_peak_is_below_the_backends_measured_rate(tmp_path):
    # 1 MMAC/s: below what the probe measures on any machine that runs the suite, however
    # loaded (half the rate a first run measured was not: a second run's probe may measure
    # less). A false peak the ОРП alone does not expose: the test above.
    path = directory(tmp_path)
    args = ("--gost-backend=numpy", "--gost-networks=Sh", "--gost-mode=inference")
    args += ("--gost-batch=4", "-k", "test_benchmark")

    run = suite(path, *args, "--gost-peak=1M")

    assert run.returncode == 1, run.stdout[-2000:]
    (test,) = run.report["benchmarks"]
    reasons = [r for r in test["noncompliance_reasons"] if "the peak is false" in r]
    assert reasons and "MAC/s the backend's own kernel of row" in reasons[0], reasons
    assert "given (--gost-peak)" in reasons[0] and "peak below measured rate" in run.stdout
    assert test["peak_macs_per_second"] < test["cells"][0]["probe"]["macs_per_second"]
