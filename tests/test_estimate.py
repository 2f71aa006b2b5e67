"""The run's time estimate (docs/benchmarking.md, "Estimate and progress"), driven by a
clock the test sets: each test's warm-up gives a MAC rate, each finished test its time."""

import time

from pytest_gostcnn.backends.numpy import NumpyBackend
from pytest_gostcnn.performance.estimate import RunEstimate, check_iterations, duration
from pytest_gostcnn.performance.loop import record_of, run
from pytest_gostcnn.performance.plan import Plan
from pytest_gostcnn.performance.record import Progress
from pytest_gostcnn.performance.rounds import Links, Rounds, TimedTest
from pytest_gostcnn.performance.timing import macs_per_image


class Clock:
    """Seconds that pass only when the test says so."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def estimate_of(*macs: int, check_work=None) -> tuple[RunEstimate, Clock]:
    """Tests "A", "B", ... of the given MACs (all their rounds'), in run order."""
    clock = Clock()
    labels = "ABCDEFGH"[: len(macs)]
    return RunEstimate(
        [(label, label, m) for label, m in zip(labels, macs, strict=True)], clock, check_work
    ), clock


def warm_up(estimate: RunEstimate, clock: Clock, key: str, macs: int, seconds: float):
    estimate.began(key)
    clock.now += seconds
    return estimate.warmed_up(key, macs)


def test_no_total_before_any_test_has_a_rate():
    estimate, _ = estimate_of(1000, 3000)

    assert estimate.total_seconds() is None


def test_first_warm_up_rate_estimates_every_test_from_its_own_macs():
    estimate, clock = estimate_of(1000, 3000)

    line = warm_up(estimate, clock, "A", macs=10, seconds=1.0)  # 10 MAC/s

    assert estimate.total_seconds() == 1000 / 10 + 3000 / 10
    assert line == (
        "run estimate: about 7 min for the rounds of 2 benchmark tests (1 from its own "
        "warm-up, 1 estimated from A's warm-up, 10 MAC/s); their checks not counted until a "
        "test's are measured"
    )


def test_a_later_tests_own_warm_up_replaces_the_guess_for_it():
    estimate, clock = estimate_of(1000, 3000)
    warm_up(estimate, clock, "A", macs=10, seconds=1.0)
    clock.now = 100.0
    estimate.finished("A")  # 100 s: as guessed, 10 MAC/s

    line = warm_up(estimate, clock, "B", macs=30, seconds=1.0)  # 30 MAC/s, not 10

    assert estimate.total_seconds() == 100 + 3000 / 30
    assert line == (
        "run estimate refined: about 3 min for the rounds of 2 benchmark tests (1 measured, 1 "
        "from its own warm-up); their checks not counted until a test's are measured; about "
        "99 s left"
    )


def test_the_measured_time_replaces_the_estimate():
    estimate, clock = estimate_of(1000, 3000)
    warm_up(estimate, clock, "A", macs=10, seconds=1.0)
    clock.now = 250.0

    estimate.finished("A")  # 250 s, where its warm-up promised 100

    # B, not begun, is guessed at A's measured rate: 4 MAC/s.
    assert estimate.total_seconds() == 250 + 3000 / 4


def test_a_total_that_moved_little_is_not_printed_again():
    estimate, clock = estimate_of(1000, 1000)
    warm_up(estimate, clock, "A", macs=10, seconds=1.0)
    clock.now = 105.0
    estimate.finished("A")

    # A took 105 s and B's warm-up gives it 100 s: 205 s against the 200 s printed, 2.5 %.
    assert warm_up(estimate, clock, "B", macs=10, seconds=1.0) is None


def test_a_total_that_moved_more_than_a_tenth_is_printed():
    estimate, clock = estimate_of(1000, 1000)
    warm_up(estimate, clock, "A", macs=10, seconds=1.0)
    clock.now = 125.0
    estimate.finished("A")

    # A took 125 s and B's warm-up gives it 100 s: 225 s against 200 s, 12.5 %.
    assert warm_up(estimate, clock, "B", macs=10, seconds=1.0).startswith(
        "run estimate refined: about 4 min"
    )


def test_a_tests_checks_are_not_counted_in_its_time_nor_in_its_rate():
    estimate, clock = estimate_of(1000, 3000)
    warm_up(estimate, clock, "A", macs=10, seconds=1.0)
    clock.now = 150.0

    estimate.finished("A", check_seconds=50.0)  # its rounds: 100 s, 10 MAC/s

    assert estimate.total_seconds() == 100 + 3000 / 10


def test_progress_names_the_test_the_share_done_and_the_time_left():
    estimate, clock = estimate_of(1000, 1000, 3000)
    warm_up(estimate, clock, "A", macs=10, seconds=1.0)
    clock.now = 100.0
    estimate.finished("A")  # 10 MAC/s measured
    estimate.began("B")
    clock.now = 125.0

    line = estimate.status("B", fraction=0.25)

    # B: 25 s for a quarter, 75 s left; C not begun: 3000 MACs at 10 MAC/s, 300 s.
    # Done 100 + 25 s of 125 + 375 = 500 s.
    assert line == (
        "run: test 2 of 3, 25.0 % of the estimated time, about 6 min left "
        "(1 test estimated from A's measured rate, 10 MAC/s)"
    )


def test_the_last_tests_progress_rests_on_nothing_guessed():
    estimate, clock = estimate_of(1000)
    warm_up(estimate, clock, "A", macs=10, seconds=1.0)
    clock.now = 50.0

    assert estimate.status("A", fraction=0.5) == (
        "run: test 1 of 1, 50.0 % of the estimated time, about 50 s left"
    )


def test_a_test_that_never_began_before_a_later_one_leaves_the_estimate():
    estimate, clock = estimate_of(1000, 1000, 1000)  # A is skipped: not verified

    warm_up(estimate, clock, "B", macs=10, seconds=1.0)

    assert estimate.total_seconds() == 200
    assert estimate.status("B", fraction=0.0).startswith("run: test 1 of 2, ")


def test_a_finished_test_that_never_began_leaves_the_estimate():
    estimate, clock = estimate_of(1000, 1000)
    estimate.finished("A")  # its item failed before any round

    warm_up(estimate, clock, "B", macs=10, seconds=1.0)

    assert estimate.total_seconds() == 100


def test_durations_read_in_the_unit_a_person_uses():
    assert [duration(s) for s in (0.25, 42, 600, 86 * 3600)] == [
        "0.2 s",
        "42 s",
        "10 min",
        "86.0 h",
    ]


def test_the_runs_first_total_is_printed_before_the_first_timed_round(shipped_networks):
    network = shipped_networks["Sh"]
    run_plan = Plan("quick", rounds=2, warmup_rounds=1, batch=1)
    macs = macs_per_image(network, "inference") * 3
    estimate = RunEstimate([(("Sh", "inference"), "Ш (Sh) inference", macs)])
    events: list[str] = []

    class Logged(NumpyBackend):
        def infer(self, *arguments):
            events.append("round")
            return super().infer(*arguments)

    test = TimedTest(Logged("float32"), network, "inference", run_plan, seed=0)
    rounds = Rounds(test, Links(estimate=estimate))
    events.clear()  # the probe's calls, before the rounds
    for event in run(rounds):
        if isinstance(event, Progress):
            events.append(event.line)

    assert events[0] == "round"  # the warm-up
    assert events[1].startswith("run estimate: about ")
    assert "for the rounds of 1 benchmark test (1 from its own warm-up)" in events[1]
    assert events[2:] == ["round", "round"]


def test_the_checks_of_the_tests_to_come_are_estimated_from_the_finished_tests_checks():
    estimate, clock = estimate_of(1000, 3000, check_work={"A": 200.0, "B": 600.0})
    warm_up(estimate, clock, "A", macs=10, seconds=1.0)
    assert estimate.check_seconds() is None  # no check measured yet
    clock.now = 151.0
    estimate.finished("A", check_seconds=50.0)  # 0.25 s per MAC of check work

    assert estimate.check_seconds() == 50.0 + 600.0 * 0.25
    estimate.began("B")
    clock.now += 10.0
    # The time left counts B's rounds and its checks still to come.
    assert estimate.status("B", 0.5).endswith(f"about {duration(10 + 150)} left")


def test_a_tests_check_work_is_its_expected_share_of_the_rounds():
    # Few rounds: every unit checked. Inference judges one image a round (a batch's share of
    # an iteration), training every round checked, each once.
    assert check_iterations("inference", 8, None, 2) == 4
    assert check_iterations("training", 8, 16, 2) == 8
    # The full profile at batch 2: about 460 images of inference, 92 rounds of training
    # (1 - 0.01 ** (1 / 25,000) of 500,000 rounds, a unit of one round each).
    inference = check_iterations("inference", 500_000, None, 2)
    training = check_iterations("training", 500_000, 16, 2)
    assert 229 < inference < 232 and 92 * 0.99 < training < 92 * 1.01


def test_section_8s_float64_rate_estimates_the_checks_before_any_test_has_finished():
    estimate, clock = estimate_of(1000, check_work={"A": 400.0})
    estimate.verified(seconds=2.0, macs=100.0)  # 0.02 s per MAC
    line = warm_up(estimate, clock, "A", macs=10, seconds=1.0)
    assert estimate.check_seconds() == 400.0 * 0.02
    assert "about 8.0 s for their checks (at the rate of section 8's float64 iterations)" in line


def test_a_tests_progress_gives_its_rounds_rate_without_its_checks(shipped_networks):
    # 5 images (the warm-up's included) in 100 s, 96 of them checks: the rounds ran at
    # 1.25 images/s, and the checks' time is the run estimate's, not the rounds' rate.
    network = shipped_networks["Sh"]
    run_plan = Plan("quick", rounds=4, warmup_rounds=1, batch=1)
    rounds = Rounds(TimedTest(NumpyBackend("float32"), network, "inference", run_plan, seed=0))
    record_of(run(rounds))
    rounds.progress.started = time.monotonic() - 100.0
    rounds.progress.set_up(rounds.next_image, checked_seconds=96.0, every=0.0)
    line = rounds.progress.said()[-1]
    assert "5/5 images (100.0%, the warm-up's included), 1.25 images/s in its rounds" in line
