"""The paired gate (``--gost-versus``) run as CI runs it: two versions of one small backend
module, each in a folder of its own and loaded under a name of its own, timed side by side
on the tiny tables (docs/benchmarking.md, "The paired gate").

The backends sleep in every round, so that their times, and so the verdicts, are the
sleep's and not this machine's load."""

import copy

import pytest
from gost_helpers import UNMEASURED_SHARING, directory, suite

# Imported here, so that this process keeps it: an in-process run would otherwise import it
# afresh (pytester forgets the modules a run imported), a second each (its compiled kernels).
from pytest_gostcnn.backends.numpy import NumpyBackend  # noqa: F401
from pytest_gostcnn.reports.check import check_report

pytest_plugins = ["pytester"]

SLEEPY = '''"""A NumPy backend whose every round sleeps {delay} s more (version {version})."""
import time

from pytest_gostcnn.backends.numpy import NumpyBackend


class Sleepy(NumpyBackend):
    name = "sleepy"
    version = "{version}"
    training_dtypes = {training}

    calls = 0

    def infer(self, network, weights, image):
        Sleepy.calls += 1
        if Sleepy.calls > {breaks}:
            raise RuntimeError("broke")
        time.sleep({delay})
        return super().infer(network, weights, image)
'''
# Ш on the tiny tables, 32 rounds of B = 1, inference; a slowdown of 50 % allowed, so that
# a loaded machine's wake-ups, which fall on either side of a pair, decide nothing.
RUN = (
    "--gost-tables=tiny",
    "--gost-networks=Sh",
    "--gost-mode=inference",
    "--gost-batch=1",
    "--gost-images=32",
    "--gost-compare-fail=50",
    *UNMEASURED_SHARING,
    "-k",
    "test_benchmark",
)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """The run's directory, with the base commit's module in base/ and the candidate's in
    head/: one module name, gostsleepy, in both."""
    path = directory(tmp_path_factory.mktemp("versus"))
    for folder, delay, version, training, breaks in (
        ("base", 0.008, "1.0", "('float32',)", 10**9),
        ("head", 0.008, "1.1", "('float32',)", 10**9),
        ("slower", 0.032, "1.2", "('float32',)", 10**9),
        ("narrow", 0.008, "1.3", "()", 10**9),
        ("breaks", 0.008, "1.4", "('float32',)", 12),  # in its 10th timed round or so
    ):
        (path / folder).mkdir()
        source = SLEEPY.format(delay=delay, version=version, training=training, breaks=breaks)
        (path / folder / "gostsleepy.py").write_text(source, encoding="utf-8")
    return path


def named(backend):
    return backend if ":" in backend else f"{backend}::gostsleepy:Sleepy"


def versus(folders, candidate, baseline, *more):
    """The suite with ``--gost-backend`` and ``--gost-versus``, each a folder of
    ``gostsleepy.py`` or a backend named whole; ``more`` after ``RUN`` (the later of two
    values of an option wins)."""
    return suite(
        folders,
        f"--gost-backend={named(candidate)}",
        f"--gost-versus={named(baseline)}",
        *RUN,
        *more,
    )


def in_process(pytester, monkeypatch, folders, candidate, baseline, *more) -> pytest.RunResult:
    """``versus`` in this process, in ``folders``, for runs that time nothing (refused
    before any work, or only collected): without ``-p gost_unshared``, whose patch of the
    package this process would keep, and with nothing left to leave unmeasured."""
    monkeypatch.chdir(folders)
    unshared = RUN.index(UNMEASURED_SHARING[-1]) + 1 - len(UNMEASURED_SHARING)
    run = RUN[:unshared] + RUN[unshared + len(UNMEASURED_SHARING) :]
    assert UNMEASURED_SHARING[-1] not in run
    return pytester.runpytest_inprocess(
        "-p",
        "no:cacheprovider",
        f"--gost-backend={named(candidate)}",
        f"--gost-versus={named(baseline)}",
        *run,
        *more,
    )


def test_two_folders_of_one_module_as_fast_pass_and_say_how_much_they_could_see(folders):
    run = versus(folders, "head", "base")
    assert run.returncode == 0, run.stdout[-3000:]
    header = (
        "gostcnn: paired gate: every benchmark test also on sleepy 1.0 (base::gostsleepy:Sleepy)"
    )
    assert any(line.startswith(header) for line in run.lines), run.stdout[:3000]
    gate = run.report["versus"]
    assert (gate["name"], gate["version"], gate["backend"]) == (
        "sleepy",
        "1.0",
        "base::gostsleepy:Sleepy",
    )
    assert run.report["system"]["backend"]["version"] == "1.1"  # two modules, not one twice
    (test,) = gate["tests"]
    assert not test["fell"] and test["not_compared"] is None
    assert test["paired"]["pairs"] == len(test["candidate_seconds"]) == 32
    assert abs(test["paired"]["slowdown"]) < 50 and test["paired"]["detectable"] <= 75
    # The candidate's timing is its own rounds', not the pairs'.
    (timing,) = run.report["benchmarks"]
    assert timing["cells"][0]["round_seconds"] == test["candidate_seconds"]
    said = run.report["noncompliance_reasons"]
    assert any(
        r.startswith("--gost-versus=base::gostsleepy:Sleepy: the rounds alternated") for r in said
    )
    assert gate["verification"] == [
        {"network": "Sh", "mode": "inference", "verdict": "correct", "passed": True}
    ]


@pytest.fixture(scope="module")
def slower(folders):
    """A candidate that sleeps 32 ms a round against its base's 8 ms."""
    return versus(folders, "slower", "base")


def test_a_slower_candidate_fails_its_item_and_exits_6(slower):
    run = slower
    assert run.returncode == 6, run.stdout[-3000:]
    (test,) = run.report["versus"]["tests"]
    assert test["fell"] and test["paired"]["slowdown"] > 100
    failure = run.longreprs("failed")["test_benchmark[Sh-inference-B1]"]
    assert "slower than the baseline sleepy 1.0 (base::gostsleepy:Sleepy)" in failure
    assert "pairs" in failure
    assert run.report["exit_status"] == 6


def test_a_baseline_that_fails_verification_gates_nothing_and_says_so(folders):
    run = versus(folders, "head", "mymod:IgnoresFcBias")
    assert run.returncode == 7, run.stdout[-3000:]
    (test,) = run.report["versus"]["tests"]
    assert test["paired"] is None and "failed section 8" in test["not_compared"]
    assert run.report["exit_reason"].startswith("the gate decided nothing for ТП-Ш-П-float32-B1")
    assert "exit status 7: the gate decided nothing" in "\n".join(run.lines[-4:])
    assert check_report(run.report, folders / "tiny") == []


def test_a_baseline_that_fails_in_its_rounds_leaves_the_pairs_before_and_gates_nothing(folders):
    run = versus(folders, "head", "breaks")
    assert run.returncode == 7, run.stdout[-3000:]
    (test,) = run.report["versus"]["tests"]
    assert "failed in its rounds" in test["not_compared"] and "broke" in test["not_compared"]
    assert 0 < len(test["baseline_seconds"]) == len(test["candidate_seconds"]) < 32
    (timing,) = run.report["benchmarks"]
    assert len(timing["cells"][0]["round_seconds"]) == 32  # the candidate timed every round
    assert check_report(run.report, folders / "tiny") == []


def test_too_few_pairs_are_not_a_pass(folders):
    run = versus(folders, "head", "base", "--gost-images=4")
    assert run.returncode == 7, run.stdout[-3000:]
    assert (
        "too few pairs (4; at least 5 at this level"
        in run.report["versus"]["tests"][0]["not_compared"]
    )


def test_a_gate_with_no_benchmark_test_selected_decides_nothing_and_says_so(
    folders, pytester, monkeypatch
):
    run = versus(folders, "head", "base", "-k", "test_network")
    assert run.returncode == 7, run.stdout[-3000:]
    assert "no benchmark test was selected (-k)" in run.report["exit_reason"]
    collected = in_process(pytester, monkeypatch, folders, "head", "base", "--collect-only")
    assert collected.ret == 0, collected.stdout.str()[-3000:]


@pytest.mark.parametrize(
    "baseline, words",
    [
        ("narrow::gostsleepy:Sleepy", "declares no data type for training"),
        ("nowhere::gostsleepy:Sleepy", "no folder 'nowhere'"),
        ("base::gostsleepy", "FOLDER::module:Class"),
    ],
)
def test_a_baseline_that_cannot_run_the_same_tests_is_a_usage_error(
    folders, pytester, monkeypatch, baseline, words
):
    run = in_process(pytester, monkeypatch, folders, "head", baseline, "--gost-mode=both")
    said = run.stdout.str() + run.stderr.str()
    assert run.ret == 4, said[-4000:]
    assert f"--gost-versus={baseline}: " in said and words in said
    assert "--gost-backend: --gost-versus" not in said and "Traceback" not in said


def test_check_recomputes_the_pairs_and_replays_the_verdict(slower, folders):
    run = slower
    tables = folders / "tiny"
    assert check_report(run.report, tables) == []
    passed = copy.deepcopy(run.report)
    passed["versus"]["tests"][0]["fell"] = False  # the verdict edited
    assert any("recomputed fell" in p for p in check_report(passed, tables))
    # Every baseline round doubled: every pair's log-ratio falls by log 2, and so must their
    # centre (one pair edited need not move a median).
    faster = copy.deepcopy(run.report)
    test = faster["versus"]["tests"][0]
    test["baseline_seconds"] = [2 * seconds for seconds in test["baseline_seconds"]]
    assert any("versus" in p and "slowdown" in p for p in check_report(faster, tables))
    other = copy.deepcopy(run.report)
    other["versus"]["tests"][0]["candidate_seconds"][3] /= 2
    assert any("not the test's timed rounds" in p for p in check_report(other, tables))
