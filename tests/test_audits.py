"""Audited timed rounds (docs/standard.md §7.7): a backend right while verified and wrong
while timed is caught by a round checked against the float64 reference after it ends.

The rounds are driven here as pytest-benchmark drives them (setup, the timed target,
teardown), with a seeded draw so that each test audits known rounds.
"""

import random

import gost_test_backends as mutants
import numpy as np
import pytest
from gost_helpers import MARGIN, SMALL_PLAN, Scripted, auditor, round_by_round

from pytest_gostcnn.backends.cupy.xp_kernels import XpBackend
from pytest_gostcnn.backends.numpy import NumpyBackend
from pytest_gostcnn.conformance.verification import (
    NOT_CORRECT,
    NOT_VERIFIED,
    verify_network,
    verify_round,
)
from pytest_gostcnn.performance.audit_draw import AUDIT_EVERY, AUDIT_WINDOW
from pytest_gostcnn.performance.plan import plan
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
        TimedTest(backend, network, mode, run_plan, seed=3),
        Links(
            audit=auditor(backend, network, mode, threshold),
            randomness=random.Random(draw_seed),
        ),
    )
    if draw is not None:
        rounds.draw = draw
    for _ in range(run_plan.warmup_rounds + run_plan.rounds):
        arguments, _ = rounds.setup()
        rounds.target(*arguments)
        rounds.teardown(*arguments)
    return rounds


# The draw.


@pytest.mark.parametrize("rounds", [2, 3, 8, 16, 25, 977])
def test_one_audited_round_among_the_first_ten_and_another_among_the_last_ten(rounds):
    for seed in range(50):
        chosen = round_by_round(rounds, random.Random(seed))
        assert len(chosen) == len(set(chosen)) >= 2
        assert list(chosen) == sorted(chosen) and 1 <= chosen[0] and chosen[-1] <= rounds
        assert chosen[0] <= AUDIT_WINDOW and chosen[-1] > rounds - AUDIT_WINDOW


def test_a_long_run_audits_one_more_round_per_ten_thousand():
    rounds = 1_000_000  # the full profile at batch 1
    chosen = round_by_round(rounds, random.Random(0))
    assert len(chosen) == 2 + rounds // AUDIT_EVERY
    assert len(set(chosen)) == len(chosen) and chosen[-1] <= rounds


def test_the_audits_are_drawn_from_the_operating_systems_randomness(shipped_networks):
    # Not from the session's seed, and from no generator whose state a backend could read:
    # SystemRandom keeps none. Two tests with the same seed audit other rounds.
    backend = NumpyBackend("float32")
    network = shipped_networks["Sh"]
    draws = [
        Rounds(
            TimedTest(backend, network, "inference", plan("full", 1), seed=0), Links(audit=print)
        ).draw
        for _ in range(2)
    ]
    assert all(type(draw.randomness) is random.SystemRandom for draw in draws)
    assert all(draw.past == [] for draw in draws)  # nothing decided before a round ran
    chosen = {tuple(n for n in range(1, 2001) if draw.decide(n)) for draw in draws * 10}
    assert len(chosen) > 1


# A correct backend.


@pytest.mark.parametrize("mode", ["inference", "training"])
def test_a_correct_backend_passes_every_audited_round(shipped_networks, mode):
    rounds = timed(NumpyBackend("float32"), shipped_networks["Sh"], mode)

    assert [a.round for a in rounds.audits] == rounds.draw.past and len(rounds.audits) >= 2
    assert all(a.passed and a.worst_ratio < 1 for a in rounds.audits), rounds.audits
    if mode == "training":  # the updated weights are among the arrays compared
        assert all("updated" in a.worst_array or "gradient" in a.worst_array for a in rounds.audits)


def test_float16_training_passes_its_audits_from_its_float32_master_weights(shipped_networks):
    # Training in float16 keeps the weights in float32 (docs/standard.md §6): the copy an
    # audit starts from is those float32 values, not float16 ones.
    rounds = timed(NumpyXp("float16"), shipped_networks["Sh"], "training")

    assert len(rounds.audits) >= 2 and all(a.passed for a in rounds.audits), rounds.audits


def test_the_audit_runs_after_the_timed_target_not_inside_it(shipped_networks):
    backend = NumpyBackend("float32")
    network = shipped_networks["Sh"]
    rounds = Rounds(
        TimedTest(backend, network, "inference", SMALL_PLAN, seed=3),
        Links(audit=auditor(backend, network, "inference")),
    )
    rounds.draw = Scripted((2,))
    for _ in range(SMALL_PLAN.warmup_rounds + 2):
        arguments, _ = rounds.setup()
        rounds.target(*arguments)
        assert rounds.audits == []  # nothing checked within what pytest-benchmark times
        rounds.teardown(*arguments)
    assert [a.round for a in rounds.audits] == [2]


# Backends that cheat while timed: each verifies correct, and an audit fails by far.


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
def test_a_backend_that_cheats_only_while_timed_fails_an_audit(shipped_networks, mutant, mode):
    backend = mutant("float32")
    network = shipped_networks["Sh"]
    assert not verify_network(backend, network, mode, batch=1, seed=5).failed

    rounds = timed(backend, network, mode)

    failed = [a for a in rounds.audits if not a.passed]
    assert failed, rounds.audits
    assert failed[0].round in rounds.draw.past and failed[0].verdict == NOT_CORRECT
    assert failed[0].worst_ratio >= MARGIN, failed[0]


def test_after_a_failed_audit_the_remaining_rounds_call_the_backend_no_more(shipped_networks):
    backend = mutants.CachesAnswer("float32")  # the warm-up and round 1 computed, then cached
    rounds = timed(backend, shipped_networks["Sh"], "inference", draw=Scripted((2, 3)))

    assert rounds.draw.past == [2, 3]  # round 3 is drawn, but no longer run
    assert [(a.round, a.passed) for a in rounds.audits] == [(2, False)]
    assert backend.calls == {"Sh": 1 + 2}  # the warm-up and rounds 1 and 2; round 3 idled


def test_a_later_audit_of_a_segment_replays_no_round_an_earlier_audit_ran(
    shipped_networks, monkeypatch
):
    # Rounds 2 and 3 audited in one segment: the replay runs round 1, round 2's audit runs
    # round 2's iteration and the replay goes on from it, so round 3's audit replays nothing,
    # and both pass (a replay that took a wrong state would fail round 3).
    from pytest_gostcnn.conformance.replay import Replay

    replayed = []
    advance = Replay.advance

    def recorded(self, rounds):
        rounds = list(rounds)
        replayed.append(len(rounds))
        advance(self, rounds)

    monkeypatch.setattr(Replay, "advance", recorded)
    network = shipped_networks["Sh"]
    rounds = timed(NumpyBackend("float32"), network, "training", draw=Scripted((2, 3)))

    assert [(a.round, a.passed) for a in rounds.audits] == [(2, True), (3, True)]
    assert replayed == [1, 0]  # round 1 for round 2's audit; nothing for round 3's


def test_an_overridden_threshold_applies_to_the_audit_too(shipped_networks):
    # The audit holds СКО against the same СКОП as section 8: --gost-rmse-threshold admits
    # there what it admits here (and the run says it is not compliant).
    network = shipped_networks["Sh"]
    rounds = timed(mutants.LowPrecisionWhenTimed("float32"), network, "inference", threshold=1e9)
    assert all(a.passed for a in rounds.audits)


def test_a_round_whose_reference_outgrows_the_data_type_gets_no_verdict(shipped_networks):
    # Training carries the weights from round to round; where they have grown so far that
    # the float64 reference passes what the type holds, an overflowing backend is not at
    # fault: the audit says so instead of calling it not correct (and the test fails).
    network = shipped_networks["Sh"]
    rounds = Rounds(TimedTest(NumpyBackend("float32"), network, "training", SMALL_PLAN, seed=3))
    grown = {n: {k: a * 1e20 for k, a in ws.items()} for n, ws in rounds.host_weights.items()}
    image = rounds.images.batch(0, 1)
    residual = np.ones((1, *network.output_shape)) * 2.0**-20

    with np.errstate(over="ignore", invalid="ignore"):  # the reference overflows, as said
        result = verify_round(
            NumpyBackend("float32"), network, "training", grown, image, residual, None, None
        )

    assert result.verdict == NOT_VERIFIED
    assert "beyond float32's largest value" in result.error and "no verdict" in result.error


def test_a_float16_round_is_judged_against_float16s_range(shipped_networks):
    network = shipped_networks["Sh"]
    rounds = Rounds(TimedTest(NumpyBackend("float32"), network, "inference", SMALL_PLAN, seed=3))
    image = rounds.images.batch(0, 1) * 100  # outputs past 65504, well inside float32

    result = verify_round(
        NumpyXp("float16"), network, "inference", rounds.host_weights, image, None, None, None
    )

    assert result.verdict == NOT_VERIFIED and "beyond float16's largest value 65504" in result.error
