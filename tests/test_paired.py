"""The paired gate's statistics (``reports/paired.py``): Wilcoxon's signed-rank test counted
exactly, its interval agreeing with it, Holm's step-down as each test ends, and the rates
of false alarms and catches the gate states, simulated; and its rounds
(``performance/loop.py``): both backends on one batch per pair, in a drawn order."""

import itertools
import math
import random
import zlib

import numpy as np
import pytest
from gost_helpers import directory

from pytest_gostcnn.backends.numpy import NumpyBackend
from pytest_gostcnn.model.table_files import load_networks
from pytest_gostcnn.performance.loop import record_of, run
from pytest_gostcnn.performance.plan import Plan
from pytest_gostcnn.performance.rounds import Links, Rounds, TimedTest
from pytest_gostcnn.reports import paired as gate


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return load_networks(directory(tmp_path_factory.mktemp("tables")) / "tiny")["Sh"]


def brute_force_p(differences, centre):
    """P(W+ >= w) by enumerating every sign assignment of the ranks."""
    d = np.asarray(differences) - centre
    d = d[d != 0]
    ranks = np.argsort(np.argsort(np.abs(d))) + 1
    observed = ranks[d > 0].sum()
    sums = [
        sum(r for r, positive in zip(ranks, signs, strict=True) if positive)
        for signs in itertools.product([False, True], repeat=d.size)
    ]
    return np.mean(np.array(sums) >= observed)


@pytest.mark.parametrize("n", [1, 3, 6, 9])
def test_the_signed_rank_p_is_the_count_of_every_sign_assignment(n):
    rng = np.random.default_rng(n)
    for _ in range(5):
        d = rng.normal(0.02, 0.05, n)
        assert gate.signed_rank_p(d, 0.01) == pytest.approx(brute_force_p(d, 0.01))


def test_the_interval_and_the_test_agree():
    """The one-sided bound is above the allowed log ratio exactly when p is at most the
    level: the interval a run prints never contradicts its verdict."""
    rng = np.random.default_rng(7)
    for n in (8, 12, 25, 80):
        for shift in (0.0, 0.03, 0.05, 0.08):
            d = rng.normal(shift, 0.03, n)
            walsh = np.sort([(a + b) / 2 for a, b in itertools.combinations_with_replacement(d, 2)])
            threshold = math.log1p(0.05)
            bound = gate.lower_bound(walsh, n, 0.05)
            if n <= gate.EXACT_PAIRS:  # the normal approximation agrees only nearly
                assert (bound > threshold) == (gate.signed_rank_p(d, threshold) <= 0.05)


def test_too_few_pairs_bound_nothing():
    """Five pairs cannot give p below 1/32: among two tests (Holm's first level 0.025)
    nothing is detectable, and the verdict says the gate compared nothing rather than that
    the test passed, though every pair is 20 % slower."""
    result = gate.paired("t", [1.2] * 5, [1.0] * 5, [True] * 5, 5.0, gate.LEVEL / 2)
    assert math.isinf(result.detectable)
    verdict = gate.decide([], result, tests=2)
    assert not verdict.fell
    assert verdict.not_compared.startswith("too few pairs")


def test_holm_as_each_test_ends_rejects_only_what_holm_over_all_rejects():
    rng = np.random.default_rng(3)
    for _ in range(200):
        tests = int(rng.integers(1, 12))
        p = list(rng.uniform(0, 0.02, tests) * rng.integers(0, 3, tests))
        full = gate.holm_rejects(p, tests)
        online = [gate.holm_rejects(p[: i + 1], tests)[-1] for i in range(tests)]
        assert all(full[i] or not online[i] for i in range(tests))
    # Holm's steps: 0.01 <= 0.05/3, then 0.02 <= 0.05/2, then 0.04 <= 0.05.
    assert gate.holm_rejects([0.02, 0.01, 0.04], 3) == [True, True, True]
    assert gate.holm_rejects([0.02, 0.01, 0.04], 4) == [False, True, False]
    assert gate.holm_rejects([0.02], 3) == [False]  # two tests still to come


def noisy_pairs(rng, pairs, slowdown, noise):
    """Round times with a common drift (the machine) and each round's own noise."""
    drift = np.exp(rng.normal(0, 0.3, pairs))
    baseline = 0.01 * drift * np.exp(rng.normal(0, noise, pairs))
    candidate = 0.01 * (1 + slowdown) * drift * np.exp(rng.normal(0, noise, pairs))
    return candidate, baseline


def verdicts(slowdown, runs=400, pairs=30, noise=0.02, allowed=5.0, tests=1):
    rng = np.random.default_rng(11)
    fell = 0
    for _ in range(runs):
        candidate, baseline = noisy_pairs(rng, pairs, slowdown, noise)
        result = gate.paired("t", candidate, baseline, [True] * pairs, allowed, 0.05 / tests)
        fell += gate.decide([], result, tests).fell
    return fell / runs


def test_the_stated_rates_hold_in_simulation():
    """A drift that moves both rounds of a pair alike moves nothing; a candidate as slow as
    allowed falls at most at the level; one 10 % slower, with 2 % noise a round, is caught
    nearly always."""
    assert verdicts(0.0) == 0.0
    assert verdicts(0.05) <= gate.LEVEL + 0.02
    assert verdicts(0.10) >= 0.95


def test_a_verdict_is_kept_whole_in_the_report():
    candidate, baseline = [0.012] * 10, [0.010] * 10
    result = gate.paired("t", candidate, baseline, [True, False] * 5, 5.0, 0.05)
    kept = gate.pair_seconds(candidate, baseline, [True, False] * 5)
    data = gate.decide([], result, 1, kept).as_dict()
    assert data["fell"] and data["paired"]["slowdown"] == pytest.approx(20.0)
    assert data["candidate_seconds"] == candidate and data["candidate_first"][:2] == [True, False]
    assert data["paired"]["candidate_first"] == 5


def test_pairs_must_be_pairs_of_positive_times():
    with pytest.raises(ValueError, match="not pairs"):
        gate.paired("t", [1.0, 2.0], [1.0], [True], 5.0, 0.05)
    with pytest.raises(ValueError, match="not pairs"):
        gate.paired("t", [0.0], [1.0], [True], 5.0, 0.05)


class Recording(NumpyBackend):
    """Records the checksum of every batch of images handed over, and when."""

    def __init__(self, *args, log, **kwargs):
        super().__init__(*args, **kwargs)
        self.log = log

    def to_device(self, array):
        if array.shape == (2, 6, 6, 2):  # a batch of the tiny tables' images, not a weight
            self.log.append((self.name_in_log, zlib.crc32(np.ascontiguousarray(array).tobytes())))
        return super().to_device(array)


@pytest.mark.parametrize("mode", ["inference", "training"])
def test_pairs_run_both_backends_on_the_same_images_in_a_drawn_order(tiny, mode):
    log = []
    backends = []
    for name in ("candidate", "baseline"):
        backend = Recording("float32", log=log)
        backend.name_in_log = name
        backends.append(backend)
    run_plan = Plan(None, 12, 1, 2, 24)
    loops = [
        Rounds(TimedTest(b, tiny, mode, run_plan, seed=3, checked=False), Links()) for b in backends
    ]
    log.clear()  # the probes' own input
    record = record_of(run(loops[0], baseline=loops[1], randomness=random.Random(5)))
    pairs = record.pairs
    assert len(record.round_seconds) == len(pairs.baseline_seconds) == pairs.pairs == 12
    assert 0 < sum(pairs.candidate_first) < 12  # both orders drawn
    timed = log[2:]  # after the warm-up pair
    for (first, a), (second, b), candidate_first in zip(
        timed[::2], timed[1::2], pairs.candidate_first, strict=True
    ):
        assert a == b  # one data key for both
        assert (first == "candidate") == candidate_first and {first, second} == {
            "candidate",
            "baseline",
        }
    assert len({crc for _, crc in timed}) == 12  # a new batch every pair
