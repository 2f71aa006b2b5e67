"""Checked timed rounds (docs/standard.md §7.7): each inference round or training unit (k
rounds of a segment) is checked with the same chance, drawn after it delivered, and a
backend right while verified and wrong while timed fails the check of a unit it cheated in.

The rounds are driven here as pytest-benchmark drives them (setup, the timed target,
teardown), with a seeded or scripted draw so that each test checks known units.
"""

import math
import random

import gost_test_backends as mutants
import numpy as np
import pytest
from gost_helpers import HALF, MARGIN, SMALL_PLAN, Scripted, run_rounds

from pytest_gostcnn.backends.cupy.xp_backend import XpBackend
from pytest_gostcnn.backends.numpy import NumpyBackend
from pytest_gostcnn.conformance import replay, timed_check
from pytest_gostcnn.conformance.error_kernels import ErrorModelKernels
from pytest_gostcnn.conformance.timed_check import UPDATE_SHARE, update_check
from pytest_gostcnn.conformance.verification import (
    NOT_CORRECT,
    NOT_VERIFIED,
    DeliveredRound,
    verify_network,
    verify_round,
    verify_unit,
)
from pytest_gostcnn.performance.checks import (
    CHEAT_SHARES,
    POWER,
    CheckDraw,
    Units,
    implausible_checks,
)
from pytest_gostcnn.performance.images import ImageSet
from pytest_gostcnn.performance.kept import unit_rounds
from pytest_gostcnn.performance.plan import Plan, plan
from pytest_gostcnn.performance.rounds import Links, Rounds, TimedTest


class NumpyXp(XpBackend):
    """The CuPy backend's kernels on NumPy, which declare float16 training."""

    name = "numpy-xp"
    xp = np

    def device(self):
        return "CPU: the xp kernels on NumPy"


def timed(backend, network, mode, run_plan=SMALL_PLAN, draw_seed=0, threshold=None, draw=None, k=1):
    """Every round of one test, warm-up first, through the suite's loop
    (``draw``: a scripted one in place of the seeded draw; ``k``: training's unit, fixed
    here where a run measures it; None, measured)."""
    test = TimedTest(backend, network, mode, run_plan, seed=3, threshold=threshold, unit_rounds=k)
    rounds = Rounds(test, Links(randomness=random.Random(draw_seed)))
    if draw is not None:
        rounds.draw = draw
    return run_rounds(rounds)


# The draw: one chance for every unit, from the power asked.


@pytest.mark.parametrize(("mode", "k"), [("inference", None), ("training", 1), ("training", 3)])
@pytest.mark.parametrize("batch", [1, 2, 64, 128, 256, 1024])
def test_the_full_profiles_chance_gives_the_stated_power_at_every_batch(mode, k, batch):
    rounds = plan("full", batch).rounds
    units = Units(mode, rounds, 16 if mode == "training" else None, k)
    # A cheat on 5 % (1 %) of the rounds fills at least ceil(that / k) units.
    wrong = math.ceil(math.ceil(CHEAT_SHARES[mode] * rounds) / (k or 1))

    assert 0 < units.chance < 1
    assert 1 - (1 - units.chance) ** wrong == pytest.approx(POWER)  # at least 99 %, no more
    assert units.power(units.chance) == pytest.approx(POWER)


def test_a_test_whose_share_is_one_unit_or_less_checks_every_unit():
    # The quick run: 8 rounds; 1 % (5 %) of them is less than one round.
    assert Units("inference", 8).chance == 1.0
    assert Units("training", 8, 16, 1).chance == 1.0
    assert Units("inference", 100).chance == 1.0  # 1 % of 100 is one round
    assert Units("inference", 101).chance < 1.0  # two rounds: 0.9 each is enough
    assert Units("training", 60, 16, 3).chance == 1.0  # 3 rounds: one unit of 3
    assert Units("training", 61, 16, 3).chance < 1.0  # 4 rounds fill two units


def test_training_units_are_k_rounds_of_a_segment_the_last_of_each_shorter():
    # Segments of 16, k = 3: rounds 1-3, 4-6, ..., 13-15, 16; then 17-19, ...; 40 rounds.
    units = Units("training", 40, 16, 3)
    starts = [n for n in range(1, 41) if units.first(n) == n]
    assert starts == [1, 4, 7, 10, 13, 16, 17, 20, 23, 26, 29, 32, 33, 36, 39]
    assert [units.last(n) for n in starts] == [3, 6, 9, 12, 15, 16, 19, 22, 25, 28, 31, 32,
                                               35, 38, 40]  # fmt: skip
    assert units.count == 15 and [units.index(n) for n in (1, 3, 4, 16, 17, 40)] == [
        0, 0, 1, 5, 6, 14
    ]  # fmt: skip
    assert units.up_to(16) == 6 and units.up_to(0) == 0


def test_a_report_from_before_units_of_rounds_keeps_its_segments():
    # unit_rounds absent: each unit a segment, the power over a share of them, as written.
    units = Units("training", 2000, 16)
    assert units.segments and units.count == 125 and units.length == 16
    assert units.wrong() == math.ceil(0.05 * 125)
    assert "5 % of these segments" in units.power_text(units.chance)


def test_the_power_text_says_the_share_and_the_probability():
    units = Units("inference", 500_000)
    text = units.power_text(units.chance)
    assert "1 % of these rounds" in text and "probability 99.0 %" in text
    assert "probability 100 %" in Units("training", 1, 16, 1).power_text(1.0)


def test_every_unit_is_drawn_with_the_same_chance_whatever_came_before():
    # No history makes a later unit's chance zero or smaller: the draws are independent.
    # Over 200,000 units at 0.05, the count after a checked unit and after an unchecked
    # one agree with the chance within five standard deviations.
    draw = CheckDraw(0.05, random.Random(7))
    decisions = [draw.decide() for _ in range(200_000)]
    after = {True: [], False: []}
    for before, now in zip(decisions, decisions[1:], strict=False):
        after[before].append(now)
    for seen in after.values():
        share, sigma = sum(seen) / len(seen), math.sqrt(0.05 * 0.95 / len(seen))
        assert abs(share - 0.05) < 5 * sigma
    # And no run of unchecked units is safe: the longest gap reaches far past 1 / chance.
    gaps = np.diff(np.flatnonzero(decisions))
    assert gaps.max() > 100


def test_the_draw_comes_from_the_operating_systems_randomness(shipped_networks):
    # Not from the session's seed, and from no generator whose state a backend could read:
    # SystemRandom keeps none.
    backend = NumpyBackend("float32")
    network = shipped_networks["Sh"]
    rounds = Rounds(TimedTest(backend, network, "inference", plan("full", 1), seed=0))
    assert type(rounds.draw.randomness) is random.SystemRandom
    assert 0 < rounds.draw.chance < 0.001


@pytest.mark.parametrize(
    ("chance", "decided", "checked", "plausible"),
    [
        (1.0, 8, 8, True),
        (1.0, 8, 7, False),  # every unit is checked at chance 1
        (0.01, 1_000_000, 10_000, True),
        (0.01, 1_000_000, 9_700, True),  # three standard deviations
        (0.01, 1_000_000, 0, False),  # a report whose checks were left out
        (0.01, 1_000_000, 9_000, False),
        (0.5, 10, 0, True),  # 1 in 1024: a draw gives it
        (0.3, 50, 51, False),
    ],
)
def test_check_refuses_a_count_of_checks_no_draw_of_the_chance_gives(
    chance, decided, checked, plausible
):
    assert (implausible_checks(chance, decided, checked) is None) == plausible


# A correct backend.


@pytest.mark.parametrize(("mode", "k"), [("inference", None), ("training", 1), ("training", 3)])
def test_a_correct_backend_passes_every_check(shipped_networks, mode, k):
    rounds = timed(NumpyBackend("float32"), shipped_networks["Sh"], mode, k=k)

    # Three rounds: every round checked, alone (k = 1) or as one unit of three.
    expected = [1] if k == 3 else [1, 2, 3]
    assert [a.round for a in rounds.checks] == expected
    assert all(a.passed and a.worst_ratio < 1 for a in rounds.checks), rounds.checks
    assert all(a.rounds == len(a.keys) == (k or 1) for a in rounds.checks)


def test_the_warm_up_measures_the_weights_copy_and_sets_the_unit_from_it(shipped_networks):
    network = shipped_networks["Sh"]
    run_plan = Plan("quick", rounds=2, warmup_rounds=1, batch=1)
    rounds = Rounds(TimedTest(NumpyBackend("float32"), network, "training", run_plan, seed=3))
    assert rounds.unit_rounds is None  # not known before the warm-up

    arguments = rounds.setup()
    rounds.target(*arguments)
    rounds.teardown()

    k, (weights, residual, round_seconds) = rounds.unit_rounds, rounds.copies
    assert 0 < weights and 0 < residual and 1 <= k <= rounds.segment_rounds
    # The fewest rounds that keep every round's input residual and one copy of the weights
    # within 1 % of their time (a segment at most).
    assert k == unit_rounds(weights, residual, round_seconds, rounds.segment_rounds)
    share = (weights / k + residual) / round_seconds
    assert rounds.copy_share == share and (share <= 0.01 or k == rounds.segment_rounds)
    assert rounds.draw.chance == Units("training", 2, rounds.segment_rounds, k).chance


def test_a_fixed_unit_is_kept_and_its_copies_still_measured(shipped_networks):
    run_plan = Plan("quick", rounds=2, warmup_rounds=1, batch=1)
    test = TimedTest(NumpyBackend("float32"), shipped_networks["Sh"], "training", run_plan, 3,
                     unit_rounds=2)  # fmt: skip
    rounds = run_rounds(Rounds(test))

    weights, residual, round_seconds = rounds.copies
    assert rounds.unit_rounds == 2 and [a.rounds for a in rounds.checks] == [2]
    assert rounds.copy_share == (weights / 2 + residual) / round_seconds


def test_float16_training_passes_its_checks_from_its_float32_master_weights(shipped_networks):
    # Training in float16 keeps the weights in float32 (docs/standard.md §6): the segment a
    # check replays starts from those float32 values, not float16 ones.
    rounds = timed(NumpyXp("float16"), shipped_networks["Sh"], "training")

    assert len(rounds.checks) == 3 and all(a.passed for a in rounds.checks), rounds.checks


def test_the_check_runs_after_the_timed_target_not_inside_it(shipped_networks):
    network = shipped_networks["Sh"]
    rounds = Rounds(TimedTest(NumpyBackend("float32"), network, "inference", SMALL_PLAN, seed=3))
    rounds.draw = Scripted((2,))
    for _ in range(SMALL_PLAN.warmup_rounds + 2):
        arguments = rounds.setup()
        rounds.target(*arguments)
        assert rounds.checks == []  # nothing checked within what pytest-benchmark times
        rounds.teardown()
    assert [a.round for a in rounds.checks] == [2]


def test_an_inference_check_judges_the_image_drawn_against_its_own_rows(shipped_networks):
    network = shipped_networks["Sh"]
    run_plan = Plan("quick", rounds=2, warmup_rounds=1, batch=3)
    rounds = timed(
        NumpyBackend("float32"), network, "inference", run_plan, draw=Scripted((1, 2), 2)
    )

    assert [(a.round, a.image, a.passed) for a in rounds.checks] == [(1, 2, True), (2, 2, True)]
    assert rounds.checker.kept == [] and rounds.key == 0  # nothing kept past its draw


def test_a_training_unit_is_drawn_once_its_last_round_delivered(shipped_networks):
    network = shipped_networks["Sh"]
    run_plan = Plan("quick", rounds=5, warmup_rounds=1, batch=1)
    test = TimedTest(
        NumpyBackend("float32"), network, "training", run_plan, 3, segment_rounds=3, unit_rounds=2
    )
    rounds = Rounds(test)
    rounds.draw = Scripted((2, 3))  # units 2 (round 3, its segment's last) and 3 (rounds 4-5)
    drawn_after = []
    for _ in range(run_plan.warmup_rounds + run_plan.rounds):
        arguments = rounds.setup()
        rounds.target(*arguments)
        before = rounds.draw.unit
        rounds.teardown()
        if rounds.draw.unit != before:
            drawn_after.append(rounds.number)

    assert drawn_after == [2, 3, 5]  # each unit's last round: k, a segment's, the test's
    assert [(a.round, a.rounds, a.passed) for a in rounds.checks] == [(3, 1, True), (4, 2, True)]


class _Keys(random.Random):
    """The round keys given, in order, after the warm-up's; the rest seeded."""

    def __init__(self, keys):
        super().__init__(0)
        self.keys = [1, *keys]

    def getrandbits(self, k):
        return self.keys.pop(0) if k == 128 and self.keys else super().getrandbits(k)


def test_a_correct_backend_passes_a_unit_whose_update_took_a_near_tie_the_other_way(
    shipped_networks, monkeypatch
):
    # A run's keys (seed 0), checked as one unit of six rounds (a unit of several rounds,
    # as a fast device's small batches give): in round 5's backward, float32 routed a
    # residual at a near tie (a ReLU's input or a window's maximum within rounding of it)
    # the other way from the float64 reference. The weights after that update differ by
    # more than rounding, by the same amount at every position of a map, so the global
    # average pooling does not average the error down: bounded as if independent, round 6
    # failed at 1.6x СКОП. Checked a round at a time from the kept weights, nothing of
    # round 5's tie reaches round 6's replay.
    keys = [
        "d1263254221bbe7b607218caa2c2c349", "ff930761020c8441a84938966cc9c559",
        "8de7b971a4d02d0916f28fcc0f0167ec", "b760994361bb93002f47e1f33cef9a3c",
        "25caf71c007394990b8de02e153ad708", "fa90bc758b002711aa747b94316964c9",
    ]  # fmt: skip
    run_plan = Plan("quick", rounds=6, warmup_rounds=1, batch=1)

    def checked(k=6):
        backend, network = NumpyBackend("float32"), shipped_networks["Sh"]
        test = TimedTest(backend, network, "training", run_plan, seed=0, unit_rounds=k)
        links = Links(randomness=_Keys(int(k, 16) for k in keys))
        checks = run_rounds(Rounds(test, links)).checks
        assert tuple(key for a in checks for key in a.keys) == tuple(keys)
        return checks[-1] if k == 6 else checks

    check = checked()
    assert check.passed and check.worst_ratio < 1, check
    alone = checked(k=1)
    assert len(alone) == 6 and all(a.passed and a.worst_ratio < 1 for a in alone), alone

    class Independent(ErrorModelKernels):
        """The replay's model with every average pooling's errors bounded as independent."""

        carried = property(lambda self: False, lambda self, value: None)

    monkeypatch.setattr(replay, "ErrorModelKernels", Independent)
    independent = checked()
    # Where this machine's float32 takes the run's tie (its BLAS sums as the run's did),
    # the bound without the shared error fails the correct backend from round 6 on.
    if independent.worst_array == "round 6 output":
        assert not independent.passed and independent.worst_ratio > 1, independent


# Backends that cheat while timed: each verifies correct, and a check fails by far.


@pytest.mark.parametrize(
    ("mutant", "mode"),
    [
        (mutants.CachesAnswer, "inference"),
        (mutants.CachesAnswer, "training"),
        (mutants.SkipsLayerWhenTimed, "inference"),
        (mutants.SkipsLayerWhenTimed, "training"),
        (mutants.LowPrecisionWhenTimed, "inference"),
        (mutants.LowPrecisionWhenTimed, "training"),
        (mutants.SkipsUpdateWhenTimed, "training"),
    ],
    ids=lambda v: v if isinstance(v, str) else v.__name__,
)
def test_a_backend_that_cheats_only_while_timed_fails_a_check(shipped_networks, mutant, mode):
    backend = mutant("float32")
    network = shipped_networks["Sh"]
    assert not verify_network(backend, network, mode, batch=1, seed=5).failed

    rounds = timed(backend, network, mode)

    failed = [a for a in rounds.checks if not a.passed]
    assert failed, rounds.checks
    assert failed[0].verdict == NOT_CORRECT
    assert failed[0].worst_ratio >= MARGIN, failed[0]


def test_a_unit_is_replayed_from_the_weights_the_backend_held_before_it(shipped_networks):
    # Timed round 2 doubles the first layer's update; round 3 starts from those weights as
    # the backend held them (the suite's copy): its check passes, and round 2's fails on
    # that layer's updated weights. Nothing of one round's error reaches another's check.
    network = shipped_networks["Sh"]
    first = network.weight_layers[0].number

    third = timed(mutants.DoublesAnUpdate("float32"), network, "training", draw=Scripted((3,)))
    second = timed(mutants.DoublesAnUpdate("float32"), network, "training", draw=Scripted((2,)))

    assert [(a.round, a.passed) for a in third.checks] == [(3, True)]
    assert third.checks[0].worst_ratio < HALF, third.checks
    assert [(a.round, a.passed) for a in second.checks] == [(2, False)]
    assert second.checks[0].worst_array == f"row {first} filters updated"
    assert second.checks[0].worst_ratio >= MARGIN, second.checks


def test_a_unit_starting_from_weights_moved_in_an_unchecked_unit_fails(
    shipped_networks, monkeypatch
):
    # Round 2 zeroes half the first layer's channels; only round 3 is checked, replayed from
    # the weights the backend held after round 2, with which it is consistent. Its start,
    # held against the drawn weights and one round's updates, gives the move away.
    network = shipped_networks["Sh"]
    first = network.weight_layers[0].number

    def checked():
        backend = mutants.ZeroesHalfAChannelBank("float32")
        return timed(backend, network, "training", draw=Scripted((3,))).checks

    (check,) = checked()
    assert (
        not check.passed
        and check.worst_array.startswith(f"row {first} ")
        and "start" in (check.worst_array)
    ), check
    assert check.worst_ratio >= MARGIN
    monkeypatch.setattr(timed_check, "START_SHARE", 1e30)  # without the bound: it passes
    (check,) = checked()
    assert check.passed, check


@pytest.mark.parametrize("k", [1, 3])
def test_every_rounds_input_residual_is_checked_not_only_a_units_last(shipped_networks, k):
    # Timed round 2 skips the backward step to the input: one unit of three rounds, or
    # a unit of its own, fails on that round's input residual.
    network = shipped_networks["Sh"]
    backend = mutants.SkipsAnInputResidual("float32")

    rounds = timed(backend, network, "training", k=k, draw=Scripted((1,) if k == 3 else (2,)))

    (check,) = rounds.checks
    assert not check.passed and check.failure.startswith("round 2 input residual"), check


def test_a_backend_leaving_out_a_layers_update_after_a_segments_first_round_fails(
    shipped_networks, monkeypatch
):
    # Г (G): the first layer's gradient is 4.6 % of the training work. Right in section 8's
    # iteration and in each segment's first round. There the error model bounds the first
    # layer's updated filters 26 times wider than their whole update, so СКОП alone passes
    # the update left out; the update's own bound (half of it) fails it, by exactly 2.
    backend = mutants.SkipsFirstUpdateAfterLoad("float32")
    network = shipped_networks["G"]
    first = network.weight_layers[0].number
    assert not verify_network(backend, network, "training", batch=1, seed=5).failed

    rounds = timed(backend, network, "training", draw=Scripted((2,)))

    (check,) = rounds.checks
    assert not check.passed and check.verdict == NOT_CORRECT, check
    assert check.worst_array == f"row {first} filters update"
    assert check.worst_ratio == pytest.approx(1 / UPDATE_SHARE)
    assert check.failure.startswith(f"row {first} filters update: update error")
    # Without the update's bound, the same round passes.
    monkeypatch.setattr(timed_check, "update_check", lambda *arguments: None)
    rounds = timed(mutants.SkipsFirstUpdateAfterLoad("float32"), network, "training",
                   draw=Scripted((2,)))  # fmt: skip
    assert rounds.checks[0].passed, rounds.checks


def test_an_update_is_judged_against_itself_where_the_weights_keep_enough_of_it():
    before = np.linspace(-1.0, 1.0, 1000)
    rounding = 2.0**-24 * np.sqrt(np.mean(before**2))
    step = np.full_like(before, 100 * rounding)
    after = before + step

    right = update_check("w", after.astype(np.float32), before, after, "float32")
    left_out = update_check("w", before.astype(np.float32), before, after, "float32")
    doubled = update_check("w", (after + step).astype(np.float32), before, after, "float32")
    too_small = update_check("w", before, before, before + step / 10, "float32")

    assert right.passed and right.ratio < 0.05
    assert not left_out.passed and left_out.ratio == pytest.approx(1 / UPDATE_SHARE, rel=0.05)
    assert not doubled.passed and doubled.ratio == pytest.approx(1 / UPDATE_SHARE, rel=0.05)
    assert too_small is None  # 10 times the rounding: below the floor of 16


def test_after_a_failed_check_the_remaining_rounds_call_the_backend_no_more(shipped_networks):
    backend = mutants.CachesAnswer("float32")  # the warm-up and round 1 computed, then cached
    rounds = timed(backend, shipped_networks["Sh"], "inference", draw=Scripted((2, 3)))

    assert rounds.draw.past == [2, 3]  # round 3 is drawn, but no longer run
    assert [(a.round, a.passed) for a in rounds.checks] == [(2, False)]
    assert backend.calls == {"Sh": 1 + 2}  # the warm-up and rounds 1 and 2; round 3 idled


def test_an_overridden_threshold_applies_to_the_check_too(shipped_networks):
    # The check holds СКО against the same СКОП as section 8: --gost-rmse-threshold admits
    # there what it admits here (and the run says it is not compliant).
    network = shipped_networks["Sh"]
    rounds = timed(mutants.LowPrecisionWhenTimed("float32"), network, "inference", threshold=1e9)
    assert rounds.checks and all(a.passed for a in rounds.checks)


def test_a_unit_whose_reference_outgrows_the_data_type_gets_no_verdict(shipped_networks):
    # Training carries the weights from round to round; where they have grown so far that
    # the float64 reference passes what the type holds, an overflowing backend is not at
    # fault: the check says so instead of calling it not correct (and the test fails).
    network = shipped_networks["Sh"]
    rounds = Rounds(TimedTest(NumpyBackend("float32"), network, "training", SMALL_PLAN, seed=3))
    grown = {n: {k: a * 1e20 for k, a in ws.items()} for n, ws in rounds.host_weights.items()}
    image = ImageSet(network.input_shape, 5).batch(0, 1)
    residual = np.ones((1, *network.output_shape)) * 2.0**-20
    output = np.zeros((1, *network.output_shape), np.float32)
    delivered = [DeliveredRound(1, output, lambda: (image, residual))]

    with np.errstate(over="ignore", invalid="ignore"):  # the reference overflows, as said
        result = verify_unit(NumpyBackend("float32"), network, grown, delivered, grown, [image])

    assert result.verdict == NOT_VERIFIED
    assert "beyond float32's largest value" in result.error and "no verdict" in result.error


def test_a_float16_round_is_judged_against_float16s_range(shipped_networks):
    network = shipped_networks["Sh"]
    rounds = Rounds(TimedTest(NumpyBackend("float32"), network, "inference", SMALL_PLAN, seed=3))
    image = ImageSet(network.input_shape, 5).batch(0, 1) * 100  # outputs past 65504

    result = verify_round(NumpyXp("float16"), network, rounds.host_weights, image, None)

    assert result.verdict == NOT_VERIFIED and "beyond float16's largest value 65504" in result.error
