"""Checked timed rounds (docs/standard.md §7.7): each inference round or training segment is
checked with the same chance, drawn after it delivered, and a backend right while verified
and wrong while timed fails the check of a unit it cheated in.

The rounds are driven here as pytest-benchmark drives them (setup, the timed target,
teardown), with a seeded or scripted draw so that each test checks known units.
"""

import math
import random

import gost_test_backends as mutants
import numpy as np
import pytest
from gost_helpers import MARGIN, SMALL_PLAN, Scripted, run_rounds

from pytest_gostcnn.backends.cupy.xp_kernels import XpBackend
from pytest_gostcnn.backends.numpy import NumpyBackend
from pytest_gostcnn.conformance import replay
from pytest_gostcnn.conformance.error_model import ErrorModelKernels
from pytest_gostcnn.conformance.verification import (
    NOT_CORRECT,
    NOT_VERIFIED,
    DeliveredRound,
    verify_network,
    verify_round,
    verify_segment,
)
from pytest_gostcnn.performance.checks import (
    CHEAT_SHARES,
    POWER,
    CheckDraw,
    check_chance,
    check_units,
    implausible_checks,
    power,
    power_text,
)
from pytest_gostcnn.performance.images import ImageSet
from pytest_gostcnn.performance.plan import Plan, plan
from pytest_gostcnn.performance.rounds import Links, Rounds, TimedTest


class NumpyXp(XpBackend):
    """The CuPy backend's kernels on NumPy, which declare float16 training."""

    name = "numpy-xp"
    xp = np

    def device(self):
        return "CPU: the xp kernels on NumPy"


def timed(backend, network, mode, run_plan=SMALL_PLAN, draw_seed=0, threshold=None, draw=None):
    """Every round of one test, warm-up first, as ``benchmark.pedantic`` runs them
    (``draw``: a scripted one in place of the seeded draw)."""
    rounds = Rounds(
        TimedTest(backend, network, mode, run_plan, seed=3, threshold=threshold),
        Links(randomness=random.Random(draw_seed)),
    )
    if draw is not None:
        rounds.draw = draw
    return run_rounds(rounds)


# The draw: one chance for every unit, from the power asked.


@pytest.mark.parametrize("mode", ["inference", "training"])
@pytest.mark.parametrize("batch", [1, 2, 64, 128, 256, 1024])
def test_the_full_profiles_chance_gives_the_stated_power_at_every_batch(mode, batch):
    rounds = plan("full", batch).rounds
    units = check_units(mode, rounds, 16 if mode == "training" else None)
    chance = check_chance(mode, units)
    wrong = math.ceil(CHEAT_SHARES[mode] * units)

    assert 0 < chance < 1
    assert 1 - (1 - chance) ** wrong == pytest.approx(POWER)  # at least 99 %, and no more
    assert power(mode, units, chance) == pytest.approx(POWER)


def test_a_test_whose_share_is_one_unit_or_less_checks_every_unit():
    # The quick run: 8 rounds; 1 % of them is less than one round.
    assert check_chance("inference", 8) == 1.0
    assert check_chance("training", check_units("training", 8, 16)) == 1.0
    assert check_chance("inference", 100) == 1.0  # 1 % of 100 is one round
    assert check_chance("inference", 101) < 1.0  # two rounds: 0.9 each is enough


def test_the_power_text_says_the_share_and_the_probability():
    text = power_text("inference", 500_000, check_chance("inference", 500_000))
    assert "1 % of these rounds" in text and "probability 99.0 %" in text
    assert "probability 100 %" in power_text("training", 1, 1.0)


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


@pytest.mark.parametrize("mode", ["inference", "training"])
def test_a_correct_backend_passes_every_check(shipped_networks, mode):
    rounds = timed(NumpyBackend("float32"), shipped_networks["Sh"], mode)

    # Three rounds: every round (inference) or the one segment (training) checked.
    expected = [1, 2, 3] if mode == "inference" else [1]
    assert [a.round for a in rounds.audits] == expected
    assert all(a.passed and a.worst_ratio < 1 for a in rounds.audits), rounds.audits
    if mode == "training":  # one segment, its three rounds judged
        assert rounds.audits[0].rounds == 3 and len(rounds.audits[0].keys) == 3


def test_float16_training_passes_its_checks_from_its_float32_master_weights(shipped_networks):
    # Training in float16 keeps the weights in float32 (docs/standard.md §6): the segment a
    # check replays starts from those float32 values, not float16 ones.
    rounds = timed(NumpyXp("float16"), shipped_networks["Sh"], "training")

    assert len(rounds.audits) == 3 and all(a.passed for a in rounds.audits), rounds.audits


def test_the_check_runs_after_the_timed_target_not_inside_it(shipped_networks):
    network = shipped_networks["Sh"]
    rounds = Rounds(TimedTest(NumpyBackend("float32"), network, "inference", SMALL_PLAN, seed=3))
    rounds.draw = Scripted((2,))
    for _ in range(SMALL_PLAN.warmup_rounds + 2):
        arguments, _ = rounds.setup()
        rounds.target(*arguments)
        assert rounds.audits == []  # nothing checked within what pytest-benchmark times
        rounds.teardown(*arguments)
    assert [a.round for a in rounds.audits] == [2]


def test_an_inference_check_judges_the_image_drawn_against_its_own_rows(shipped_networks):
    network = shipped_networks["Sh"]
    run_plan = Plan("quick", rounds=2, warmup_rounds=1, batch=3)
    rounds = timed(
        NumpyBackend("float32"), network, "inference", run_plan, draw=Scripted((1, 2), 2)
    )

    assert [(a.round, a.image, a.passed) for a in rounds.audits] == [(1, 2, True), (2, 2, True)]
    assert rounds.checks.kept == [] and rounds.key == 0  # nothing kept past its draw


def test_a_training_segment_is_drawn_once_its_last_round_delivered(shipped_networks):
    network = shipped_networks["Sh"]
    run_plan = Plan("quick", rounds=5, warmup_rounds=1, batch=1)
    rounds = Rounds(
        TimedTest(NumpyBackend("float32"), network, "training", run_plan, seed=3, segment_rounds=2)
    )
    rounds.draw = Scripted((2, 3))  # segments 2 (rounds 3-4) and 3 (round 5)
    drawn_after = []
    for _ in range(run_plan.warmup_rounds + run_plan.rounds):
        arguments, _ = rounds.setup()
        rounds.target(*arguments)
        before = rounds.draw.unit
        rounds.teardown(*arguments)
        if rounds.draw.unit != before:
            drawn_after.append(rounds.number)

    assert drawn_after == [2, 4, 5]  # each segment's last round, and the test's last
    assert [(a.round, a.rounds, a.passed) for a in rounds.audits] == [(3, 2, True), (5, 1, True)]


class _Keys(random.Random):
    """The round keys given, in order, after the warm-up's; the rest seeded."""

    def __init__(self, keys):
        super().__init__(0)
        self.keys = [1, *keys]

    def getrandbits(self, k):
        return self.keys.pop(0) if k == 128 and self.keys else super().getrandbits(k)


def test_a_correct_backend_passes_a_segment_whose_update_took_a_near_tie_the_other_way(
    shipped_networks, monkeypatch
):
    # A run's keys (seed 0): in round 5's backward, float32 routed a residual at a near tie
    # (a ReLU's input or a window's maximum within rounding of it) the other way from the
    # float64 reference. The weights after that update differ by more than rounding, by
    # the same amount at every position of a map, so the global average pooling does not
    # average the error down: bounded as if independent, round 6 failed at 1.6x СКОП.
    keys = [
        "d1263254221bbe7b607218caa2c2c349", "ff930761020c8441a84938966cc9c559",
        "8de7b971a4d02d0916f28fcc0f0167ec", "b760994361bb93002f47e1f33cef9a3c",
        "25caf71c007394990b8de02e153ad708", "fa90bc758b002711aa747b94316964c9",
    ]  # fmt: skip
    run_plan = Plan("quick", rounds=6, warmup_rounds=1, batch=1)

    def checked():
        backend, network = NumpyBackend("float32"), shipped_networks["Sh"]
        test = TimedTest(backend, network, "training", run_plan, seed=0)
        links = Links(randomness=_Keys(int(k, 16) for k in keys))
        (audit,) = run_rounds(Rounds(test, links)).audits
        assert audit.keys == tuple(keys) and audit.rounds == 6
        return audit

    audit = checked()
    assert audit.passed and audit.worst_ratio < 1, audit

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

    failed = [a for a in rounds.audits if not a.passed]
    assert failed, rounds.audits
    assert failed[0].verdict == NOT_CORRECT
    assert failed[0].worst_ratio >= MARGIN, failed[0]


def test_after_a_failed_check_the_remaining_rounds_call_the_backend_no_more(shipped_networks):
    backend = mutants.CachesAnswer("float32")  # the warm-up and round 1 computed, then cached
    rounds = timed(backend, shipped_networks["Sh"], "inference", draw=Scripted((2, 3)))

    assert rounds.draw.past == [2, 3]  # round 3 is drawn, but no longer run
    assert [(a.round, a.passed) for a in rounds.audits] == [(2, False)]
    assert backend.calls == {"Sh": 1 + 2}  # the warm-up and rounds 1 and 2; round 3 idled


def test_an_overridden_threshold_applies_to_the_check_too(shipped_networks):
    # The check holds СКО against the same СКОП as section 8: --gost-rmse-threshold admits
    # there what it admits here (and the run says it is not compliant).
    network = shipped_networks["Sh"]
    rounds = timed(mutants.LowPrecisionWhenTimed("float32"), network, "inference", threshold=1e9)
    assert rounds.audits and all(a.passed for a in rounds.audits)


def test_a_segment_whose_reference_outgrows_the_data_type_gets_no_verdict(shipped_networks):
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
        result = verify_segment(
            NumpyBackend("float32"), network, grown, delivered, grown, image, None
        )

    assert result.verdict == NOT_VERIFIED
    assert "beyond float32's largest value" in result.error and "no verdict" in result.error


def test_a_float16_round_is_judged_against_float16s_range(shipped_networks):
    network = shipped_networks["Sh"]
    rounds = Rounds(TimedTest(NumpyBackend("float32"), network, "inference", SMALL_PLAN, seed=3))
    image = ImageSet(network.input_shape, 5).batch(0, 1) * 100  # outputs past 65504

    result = verify_round(NumpyXp("float16"), network, rounds.host_weights, image, None)

    assert result.verdict == NOT_VERIFIED and "beyond float16's largest value 65504" in result.error
