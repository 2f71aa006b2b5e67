"""What a certifying body and a CI job read from a run: the word *compliant* with every
reason it does not hold, a failed check, and an exit status that gates.

Each case is run as a user runs it, in a fresh interpreter. A compliant run needs the full
profile and all six networks, which a test cannot afford at full size: here six tiny official
tables and the full profile shrunk to 4 images per test (tests/gost_helpers.py) make one in
seconds, and each case changes one thing about it. The shipped networks are used where a case
needs them.
"""

import xml.etree.ElementTree as ElementTree
from fnmatch import fnmatch
from pathlib import Path

import pytest
from gost_helpers import BACKENDS, SMALL, TINY, Run, directory, read_report, suite

# Imported here, so that this process keeps it: an in-process run would otherwise import it
# afresh (pytester forgets the modules a run imported), a second each (its compiled kernels).
from pytest_gostcnn.backends.numpy import NumpyBackend  # noqa: F401
from pytest_gostcnn.conformance.layer_cases import layer_cases, network_cases
from pytest_gostcnn.model.network import LATIN
from pytest_gostcnn.model.table_files import load_networks

pytest_plugins = ["pytester"]


def forward_items(networks: dict) -> int:
    """The layer items of an inference run: a forward step of every small case and of every
    distinct layer of the networks at its own shape."""
    return len(layer_cases()) + len(network_cases(networks))


@pytest.fixture(scope="module")
def compliant(tmp_path_factory) -> Run:
    """A correct backend's run that meets every condition: the baseline of every case."""
    path = directory(tmp_path_factory.mktemp("compliant"))
    return suite(path, "--gost-backend=numpy", "--gost-mode=inference", *TINY, "--junitxml=j.xml")


@pytest.fixture
def run_dir(tmp_path) -> Path:
    return directory(tmp_path)


def in_process(pytester: pytest.Pytester, *args: str) -> Run:
    """``suite`` in this process, for runs that verify nothing (an unavailable backend, no
    item selected): no interpreter to start. ``mymod`` is the test backends."""
    (pytester.path / "mymod.py").write_text(BACKENDS.read_text(encoding="utf-8"), "utf-8")
    pytester.syspathinsert()
    report = pytester.path / "report.json"
    result = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", *args, f"--gost-report={report}"
    )
    data = read_report(report) if report.is_file() else None
    return Run(result.ret, result.stdout.str(), result.stderr.str(), [], data, pytester.path)


# The baseline: a correct backend, every condition met.


def test_a_run_that_meets_every_condition_is_compliant_and_exits_0(compliant):
    assert compliant.returncode == 0, compliant.stdout[-3000:]
    report = compliant.report
    assert report["compliant"] is True and report["noncompliance_reasons"] == []
    (evaluation,) = report["evaluations"]
    assert evaluation["compliant"] and evaluation["complete"]
    assert evaluation["designation"] == "ОП-П-float32-B1-N1"  # no word against it
    assert [b["designation"] for b in report["benchmarks"]] == [
        f"ТП-{cyrillic}-П-float32-B1" for cyrillic in LATIN
    ]
    assert report["exit_status"] == 0 and report["exit_reason"] is None


def test_every_benchmark_checks_at_least_two_rounds_and_reports_their_time_apart(compliant):
    for benchmark in compliant.report["benchmarks"]:
        (cell,) = benchmark["cells"]
        rounds = [check["round"] for check in cell["checks"]]
        assert len(rounds) >= 2 and all(1 <= r <= benchmark["rounds"] for r in rounds)
        assert all(check["passed"] for check in cell["checks"])
        assert cell["check_seconds"] >= sum(check["seconds"] for check in cell["checks"])


def test_each_test_result_carries_the_comment_of_9_7(compliant):
    for benchmark in compliant.report["benchmarks"]:
        comment = benchmark["comment"]
        assert comment.startswith("comment: data type float32; computing cells: 1 (CPU")
        assert "not used: everything outside this cell" in comment
        assert "; cell peak " in comment and "(estimated: " in comment  # and its source
    # In the summary: the comment every test shares once, above the table; under each test's
    # row, its check line, its rounds' spread, what the cell's cores did in them.
    lines = compliant.lines
    (comment,) = {benchmark["comment"] for benchmark in compliant.report["benchmarks"]}
    assert [line for line in lines if comment in line] == [f"every test's {comment}"]
    row = next(i for i, line in enumerate(lines) if line.startswith("ТП-Ш-П-float32-B1 "))
    assert lines[row + 1].startswith("  checks: ")
    assert lines[row + 2].startswith("  rounds: median ")
    assert lines[row + 3].startswith("  during the timed rounds: ")


def test_the_summary_puts_its_russian_terms_in_words_once(compliant):
    terms = [line for line in compliant.lines if line.startswith("terms: ")]
    designations = [line for line in compliant.lines if line.startswith("designations: ")]
    assert len(terms) == len(designations) == 1
    assert "СКО = root-mean-square error" in terms[0] and "ОРП = relative real" in terms[0]
    assert "mode П (P) inference" in designations[0]
    # Before the tables that use them.
    table = compliant.lines.index(
        next(line for line in compliant.lines if line.startswith("network "))
    )
    assert compliant.lines.index(terms[0]) < table
    latin = [line for line in compliant.lines if line.startswith("in Latin letters: ")]
    assert latin == [
        "in Latin letters: "
        + ", ".join(f"ТП-{letter}-П = TP-{LATIN[letter]}-P" for letter in LATIN)
        + ", ОП-П = OP-P"
    ]


def test_the_run_ends_with_the_verdicts_and_a_line_for_the_evaluation(compliant):
    (evaluation,) = compliant.report["evaluations"]
    layers = forward_items(load_networks(compliant.path / "tiny"))
    verdicts, result = compliant.lines[-2:]
    assert verdicts == (
        f"GOST R 57700.36-2021: verification PASSED: {layers} of {layers} selected layer "
        "steps passed; 6 of 6 selected networks passed"
    )
    assert fnmatch(
        result,
        f"GOST R 57700.36-2021: inference evaluation {evaluation['designation']}: first result "
        f"{evaluation['first_result_percent']:.3g} %, second result *MAC/s: COMPLIANT",
    )


def test_junit_xml_gives_each_item_its_verdict_worst_ratio_and_orp(compliant):
    xml = compliant.path / "j.xml"
    cases = ElementTree.parse(xml).getroot().iter("testcase")
    properties = {
        case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
        for case in cases
    }
    assert len(properties) == forward_items(load_networks(compliant.path / "tiny")) + 6 + 6
    assert all(p["gost_verdict"] in ("correct", "reference-grade") for p in properties.values())
    assert all("gost_worst_rmse_ratio" in p for p in properties.values())
    benchmark = properties["test_benchmark[R-inference-B1]"]
    (timed,) = [b for b in compliant.report["benchmarks"] if b["network"] == "R"]
    assert benchmark["gost_orp_percent"] == f"{timed['orp_percent']:.3g}"
    assert benchmark["gost_checks"].endswith("passed")
    mean_above_median = 100 * timed["spread"]["mean_above_median"]
    assert benchmark["gost_mean_above_median_percent"] == f"{mean_above_median:.3g}"


# The cases, each rerun: the non-compliant result with its reason, a failed check,
# or an exit status that is not 0.


def reasons(run: Run) -> list[str]:
    return run.report["noncompliance_reasons"]


def test_an_overridden_threshold_is_a_reason_even_where_every_verdict_is_correct(run_dir):
    # A wrong update sign passes under --gost-rmse-threshold=1e9; the result is not
    # compliant, says why, and its designations say so.
    run = suite(
        run_dir,
        "--gost-backend=mymod:WrongSign",
        "--gost-mode=training",
        "--gost-rmse-threshold=1e9",
        *TINY,
    )

    assert run.returncode == 0  # every item passed: the exit status gates failures
    assert all(n["verdict"] == "correct" for n in run.report["verification"]["networks"])
    assert run.report["compliant"] is False
    assert reasons(run) == ["СКОП overridden by --gost-rmse-threshold=1e+09 (section 8 derives it)"]
    (evaluation,) = run.report["evaluations"]
    assert evaluation["designation"] == "ОП-О-float32-B1-N1 (non-compliant)"
    assert all(b["designation"].endswith(" (non-compliant)") for b in run.report["benchmarks"])
    assert run.lines[-1].endswith(": NOT COMPLIANT (СКОП overridden)")
    # The header and the verdict table say the threshold was overridden.
    assert any("СКОП OVERRIDDEN: --gost-rmse-threshold=1e+09" in line for line in run.lines)


def test_layer_items_deselected_are_a_reason_saying_how_many_ran(tmp_path):
    # On the shipped Ш with section 8's weights drawn over all of [-1, 1], a backend that
    # ignores every FC bias verifies correct as a network (its biases vanish under
    # rounding); the layer items catch it, and -k left them out.
    path = directory(tmp_path)
    run = suite(
        path,
        "--gost-backend=mymod:IgnoresFcBias",
        *SMALL,
        "--gost-weights=full-range",
        "-k",
        "test_network or test_benchmark",
    )

    assert [n["verdict"] for n in run.report["verification"]["networks"]] == ["correct"]

    assert run.report["compliant"] is False
    layers = forward_items({"Sh": load_networks()["Sh"]})
    assert (
        f"layer items: 0 of {layers} ran in this session (deselected by -k, -m, --deselect or "
        "--lf)" in reasons(run)
    )
    everything = suite(
        path, "--gost-backend=mymod:IgnoresFcBias", *SMALL, "--gost-weights=full-range"
    )
    assert everything.returncode == pytest.ExitCode.TESTS_FAILED
    fc_items = {
        f"test_layer[fc-forward-{case.tag}-float32]"
        for case in layer_cases() + network_cases({"Sh": load_networks()["Sh"]})
        if case.layer.type.name == "fc"
    }
    # The FC layer items fail; so does the benchmark's check, on data whose biases count.
    assert set(everything.longreprs("failed")) == fc_items | {"test_benchmark[Sh-inference-B1]"}


def test_tables_a_user_loads_that_are_not_official_are_a_reason(tmp_path):
    path = directory(tmp_path, provenance="reconstruction")
    run = suite(path, "--gost-backend=numpy", "--gost-mode=inference", *TINY)

    assert run.report["options"]["provenance"]["R"] == {
        "kind": "reconstruction",
        "shipped": False,
        "compliant": False,
    }
    assert "tables: Р (R) is reconstruction, from --gost-tables; only the shipped " in (
        " ".join(reasons(run))
    )


def test_a_subset_of_networks_is_a_reason_saying_how_many_of_how_many(run_dir):
    run = suite(
        run_dir, "--gost-backend=numpy", "--gost-mode=inference", *TINY, "--gost-networks=R,Sh"
    )

    assert reasons(run)[0] == "networks: 2 of 6 selected (--gost-networks)"
    assert reasons(run)[-1].startswith("inference evaluation incomplete: no result for М (M)")


def test_a_backend_that_caches_its_answer_while_timed_fails_a_check(run_dir):
    run = suite(run_dir, "--gost-backend=mymod:CachesAnswer", "--gost-mode=inference", *TINY)

    assert run.returncode == pytest.ExitCode.TESTS_FAILED
    failed = run.longreprs("failed")
    assert failed and all(name.startswith("test_benchmark[") for name in failed)
    message = next(iter(failed.values()))
    assert "check of timed round " in message and " of 4 failed (not correct)" in message
    assert "\nworst array: output\n" in message
    # The fake speed does not count: the evaluation has no result for the cheats.
    (evaluation,) = run.report["evaluations"]
    assert not evaluation["compliant"] and evaluation["results_percent"] == {}
    assert any(
        reason.startswith("check failed: ") for reason in evaluation["noncompliance_reasons"]
    )
    checks = [a for b in run.report["benchmarks"] for a in b["cells"][0]["checks"]]
    assert any(not a["passed"] for a in checks)


def test_an_unavailable_backend_exits_non_zero_saying_why_on_one_line(pytester):
    run = in_process(pytester, "--gost-backend=mymod:NoDevice", *SMALL)

    assert run.returncode == pytest.ExitCode.TESTS_FAILED
    said = [line for line in run.lines if line.startswith("gostcnn: exit status 1: ")]
    assert said == [
        "gostcnn: exit status 1: nothing was verified: backend numpy (mymod:NoDevice) is "
        "unavailable "
        "(no CUDA device); --gost-allow-unavailable exits 0 for that"
    ]
    (verdicts,) = [line for line in run.lines if line.startswith("GOST R 57700.36-2021: veri")]
    assert verdicts.startswith("GOST R 57700.36-2021: verification NOT RUN: ")
    assert "; 1 selected network not run" in verdicts


def test_allow_unavailable_keeps_exit_status_0_for_an_unavailable_backend(pytester):
    run = in_process(pytester, "--gost-backend=mymod:NoDevice", *SMALL, "--gost-allow-unavailable")

    assert run.returncode == 0
    assert run.report["compliant"] is False and "no CUDA device" in run.report["exit_reason"]


def test_allow_unavailable_does_not_excuse_an_available_backends_failure(run_dir):
    run = suite(
        run_dir,
        "--gost-backend=mymod:ScaledConv",
        *SMALL,
        "-k",
        "test_network",
        "--gost-allow-unavailable",
    )

    assert run.returncode == pytest.ExitCode.TESTS_FAILED


def test_a_run_with_no_item_of_the_suite_selected_exits_non_zero(pytester):
    run = in_process(pytester, "--gost-backend=numpy", *SMALL, "-k", "no_such_item")

    assert run.returncode == pytest.ExitCode.NO_TESTS_COLLECTED
    assert run.report["exit_reason"].startswith("nothing was verified: none of the suite's")


def test_a_run_whose_every_item_was_skipped_exits_non_zero(run_dir):
    # Timed items only, with pytest-benchmark disabled: the network is verified inside the
    # benchmark item, which is then skipped.
    run = suite(
        run_dir,
        "--gost-backend=numpy",
        *SMALL,
        "-m",
        "gost_benchmark",
        "--benchmark-disable",
    )

    assert run.returncode == pytest.ExitCode.TESTS_FAILED
    assert run.report["exit_reason"].startswith("1 of 1 selected items of the suite were skipped")
