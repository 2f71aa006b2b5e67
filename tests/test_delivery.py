"""What a timed round delivers and when its check is drawn (docs/benchmarking.md, "One
round" and "Checked rounds"; docs/standard.md §7.7): a check judges the copies the timed
region made, the decision is drawn only after the round delivered, and each round's output
is named by a fingerprint that a repeated answer gives away.

The rounds are driven as pytest-benchmark drives them (setup, target, teardown); the runs
at the end are the suite's own, with a peak so large that no ОРП passes 100 %.
"""

import hashlib
import random

import gost_test_backends as mutants
import pytest
from gost_helpers import Scripted, directory, run_rounds, suite

from pytest_gostcnn.backends.numpy import NumpyBackend
from pytest_gostcnn.conformance.verification import NOT_CORRECT, verify_network
from pytest_gostcnn.judgement.compliance import ReasonKind
from pytest_gostcnn.judgement.result import no_result, repeated_outputs
from pytest_gostcnn.performance.plan import Plan
from pytest_gostcnn.performance.rounds import Links, Rounds, TimedTest
from pytest_gostcnn.performance.timing import CellTiming, Timing, macs_per_image

PLAN = Plan("quick", rounds=6, warmup_rounds=1, batch=1)
MODES = ["inference", "training"]


def driven(backend, network, mode, check=True, draw=None, seed=0):
    """Every round of one test on Ш (Sh); ``draw`` a scripted one, else a seeded draw;
    training's checks judge a round each (k = 1), as inference's do."""
    rounds = Rounds(
        TimedTest(backend, network, mode, PLAN, seed=3, checked=check, unit_rounds=1),
        Links(randomness=random.Random(seed)),
    )
    if draw is not None:
        rounds.draw = draw
    return run_rounds(rounds)


def timing_of(rounds, network, mode) -> Timing:
    cell = CellTiming(
        0, "cpu", PLAN.images, (1.0,) * PLAN.rounds, None, "", tuple(rounds.checks),
        fingerprints=tuple(rounds.fingerprints),
    )  # fmt: skip
    return Timing(
        network.latin, mode, "float32", 1, PLAN.rounds, macs_per_image(network, mode), (cell,)
    )


def verified(mutant, network, mode):
    backend = mutant("float32")
    assert not verify_network(backend, network, mode, batch=1, seed=5).failed
    return backend


# What a check compares: the round's own delivery.


@pytest.mark.parametrize("mode", MODES)
def test_an_check_judges_the_bytes_the_round_delivered_not_a_later_read(shipped_networks, mode):
    # The output's first read is a buffer its copy fills at the next call; a second read
    # would find it filled. The check sees what the timed region got: zeros.
    network = shipped_networks["Sh"]
    backend = verified(mutants.CopiesOutputLate, network, mode)

    rounds = driven(backend, network, mode, draw=Scripted((1, 4)))

    assert [(a.round, a.passed, a.verdict) for a in rounds.checks] == [
        (1, False, NOT_CORRECT)
    ]  # fmt: skip
    assert rounds.checks[0].worst_array.endswith("output")


@pytest.mark.parametrize("mode", MODES)
def test_what_a_backend_writes_into_its_delivered_arrays_later_changes_no_verdict(
    shipped_networks, mode
):
    network = shipped_networks["Sh"]
    backend = verified(mutants.ScribblesOnWhatItDelivered, network, mode)

    rounds = driven(backend, network, mode, draw=Scripted((1, 3, 6)))

    assert rounds.error is None
    # Rounds 1, 3 and 6: in training, the weights the suite kept too.
    assert [(a.round, a.passed) for a in rounds.checks] == [(1, True), (3, True), (6, True)]


@pytest.mark.parametrize(
    ("mutant", "named"),
    [(mutants.ReturnsAList, "to_host returned list"), (mutants.Float64, "dtype float64")],
    ids=["a list", "float64"],
)
def test_a_delivery_that_is_not_the_rounds_array_fails_the_round_in_one_line(
    shipped_networks, mutant, named
):
    rounds = driven(mutant("float32"), shipped_networks["Sh"], "inference")

    assert "\n" not in rounds.error and named in rounds.error and "output" in rounds.error
    assert rounds.checks == [] and rounds.done == 0


# Commit, then reveal.


class Logged(NumpyBackend):
    """Notes the calls that end a round (its reads) and start the next (its images)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.log = []

    def to_device(self, host):
        self.log.append("to_device")
        return super().to_device(host)

    def to_host(self, array):
        self.log.append("to_host")
        return super().to_host(array)


class LoggedDraw:
    """The suite's draw, each decision noted where it falls among the backend's calls."""

    def __init__(self, draw, log, rounds):
        self.draw, self.log, self.rounds = draw, log, rounds

    def decide(self):
        self.log.append(("decide", self.rounds.number))
        return self.draw.decide()

    def image(self, batch):
        return self.draw.image(batch)


@pytest.mark.parametrize(("mode", "segment", "units"), [("inference", None, 6), ("training", 4, 3)])
def test_a_unit_is_drawn_only_after_it_delivered_and_before_the_next_round_begins(
    shipped_networks, mode, segment, units
):
    network = shipped_networks["Sh"]
    backend = Logged("float32")
    test = TimedTest(backend, network, mode, PLAN, 3, segment_rounds=segment, unit_rounds=3)
    rounds = Rounds(test)
    rounds.draw = LoggedDraw(Scripted(range(1, 7)), backend.log, rounds)
    delivered = []
    for _ in range(PLAN.warmup_rounds + PLAN.rounds):
        arguments = rounds.setup()
        assert ("decide", rounds.number) not in backend.log
        rounds.target(*arguments)
        delivered.append(len(backend.log))  # every read of the timed region is done
        rounds.teardown()
    decisions = [i for i, call in enumerate(backend.log) if isinstance(call, tuple)]
    # Inference: after every round; training: after each unit's last (units of 3 rounds
    # in segments of 4: rounds 1-3, 4, 5-6).
    ends = list(range(1, 7)) if mode == "inference" else [3, 4, 6]
    assert [backend.log[i][1] for i in decisions] == ends and len(ends) == units
    for number, at in zip(ends, decisions, strict=True):
        assert at >= delivered[number]  # after the timed round's reads
        assert "to_device" not in backend.log[delivered[number] : at]  # nothing began
    assert len(rounds.checks) == units and all(a.passed for a in rounds.checks)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "mutant",
    [mutants.SkipsReluUnlessChecked, mutants.RepeatsUnlessChecked],
    ids=lambda m: m.__name__,
)
def test_a_backend_reading_its_callers_for_the_decision_finds_none_and_fails_an_check(
    shipped_networks, mode, mutant
):
    # Against a draw made before the round (an attribute naming the checked rounds, or the
    # round pending check), each computes exactly the rounds checked and passes them.
    network = shipped_networks["Sh"]
    backend = verified(mutant, network, mode)

    rounds = driven(backend, network, mode, seed=1)

    failed = [a for a in rounds.checks if not a.passed]
    assert failed and failed[0].verdict == NOT_CORRECT, rounds.checks


# Fingerprints.


class Outputs(NumpyBackend):
    """Keeps a copy of every output map it hands to the host."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.outputs = []

    def to_host(self, array):
        host = super().to_host(array)
        if host.ndim == 4 and host.shape[1:] == (1, 1, 1000):
            self.outputs.append(host.copy())
        return host


@pytest.mark.parametrize("mode", MODES)
def test_each_timed_round_names_its_output_by_64_bits_of_a_hash_of_its_bytes(
    shipped_networks, mode
):
    backend = Outputs("float32")
    rounds = driven(backend, shipped_networks["Sh"], mode, check=False)

    timed = backend.outputs[PLAN.warmup_rounds :]
    expected = [hashlib.blake2b(o.tobytes(), digest_size=8).hexdigest() for o in timed]
    assert rounds.fingerprints == expected and len(set(expected)) == PLAN.rounds


@pytest.mark.parametrize("mode", MODES)
def test_a_backend_answering_with_an_earlier_output_fails_through_its_fingerprints(
    shipped_networks, mode
):
    # With no check at all: only the fingerprints can tell.
    network = shipped_networks["Sh"]
    rounds = driven(verified(mutants.RepeatsUnlessChecked, network, mode), network, mode, False)

    reasons = repeated_outputs(timing_of(rounds, network, mode))
    assert [r.kind for r in reasons] == [ReasonKind.OUTPUT_REPEATED]
    assert "5 timed rounds delivered an earlier round's output" in reasons[0].text
    assert reasons[0] in no_result(timing_of(rounds, network, mode))


# Correct backends.


@pytest.mark.parametrize("mode", MODES)
def test_a_backend_that_copies_asynchronously_and_waits_for_its_copies_passes(
    shipped_networks, mode
):
    network = shipped_networks["Sh"]
    backend = verified(mutants.WaitsForItsCopies, network, mode)

    rounds = driven(backend, network, mode, draw=Scripted((1, 2, 5)))

    assert rounds.error is None
    assert [(a.round, a.passed) for a in rounds.checks] == [(1, True), (2, True), (5, True)]
    assert no_result(timing_of(rounds, network, mode)) == []


# The suite's runs: each cheat fails its benchmark tests, through the guard it breaks.


@pytest.mark.parametrize(
    ("mutant", "guard"),
    [
        ("CopiesOutputLate", {"check failed"}),
        ("SkipsReluUnlessChecked", {"check failed"}),
        # A first check that fails ends the rounds before any repeat: then the check tells.
        ("RepeatsUnlessChecked", {"output repeated", "check failed"}),
        ("WaitsForItsCopies", None),
    ],
)
def test_each_cheat_fails_its_benchmark_tests_through_its_guard(tmp_path, mutant, guard):
    run = suite(
        directory(tmp_path),
        f"--gost-backend=mymod:{mutant}",
        "--gost-networks=Sh",
        "--gost-batch=1",
        "--gost-peak=1000T",
        "-k",
        "test_benchmark",
    )
    tests = run.report["benchmarks"]
    assert len(tests) == 2, run.stdout[-2000:]
    for test in tests:
        shorts = {reason.split(":")[0] for reason in test["noncompliance_reasons"]}
        assert not any("ОРП" in reason for reason in test["noncompliance_reasons"])
        if guard is None:
            assert not shorts & {"check failed", "output repeated", "not checked"}, shorts
        else:
            assert guard & shorts, shorts
    assert (run.returncode != 0) == (guard is not None), run.stdout[-2000:]
