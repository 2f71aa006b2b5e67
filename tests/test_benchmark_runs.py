"""Section 9 as a user meets it: benchmark items, the evaluation, and the JSON report."""

import json
import os
import stat

import pytest
from gost_helpers import BACKENDS, SCHEMA_VALIDATOR, SMALL, Run, directory, read_report, suite
from gost_test_recorder import Recorded, as_user, in_process

# Imported here, so that this process keeps it: an in-process run would otherwise import it
# afresh (pytester forgets the modules a run imported), a second each (its compiled kernels).
from pytest_gostcnn.backends.numpy import NumpyBackend  # noqa: F401
from pytest_gostcnn.reports.check import check_report
from pytest_gostcnn.run.report import write_report

pytest_plugins = ["pytester"]

NUMPY_SMALL = ("--gost-backend=numpy", *SMALL)


@pytest.fixture
def backends(pytester: pytest.Pytester) -> None:
    """``mymod`` (tests/gost_test_backends.py), importable in the runs' subprocesses."""
    (pytester.path / "mymod.py").write_text(BACKENDS.read_text(encoding="utf-8"), "utf-8")


def run(pytester, *args):
    return pytester.runpytest_subprocess(*args, "-p", "no:cacheprovider")


def output(run: Run) -> pytest.LineMatcher:
    """A ``suite`` run's output, its lines matched as a pytester run's are."""
    return pytest.LineMatcher(run.stdout.splitlines())


def recorded(pytester, *args) -> Recorded:
    """``run``, and what the run collected and its tests reported."""
    return as_user(pytester, *args, "-p", "no:cacheprovider")


@pytest.fixture(scope="module")
def quick(tmp_path_factory) -> Run:
    """One run of Ш at B = 1 in inference, verified and timed in the quick profile, with
    pytest-benchmark's options that the suite honours (a fresh interpreter)."""
    path = directory(tmp_path_factory.mktemp("quick"))
    options = ("--benchmark-disable-gc", f"--benchmark-json={path / 'benchmark.json'}")
    options += ("--benchmark-cprofile=cumtime",)
    return suite(path, *NUMPY_SMALL, *options)


def test_report_of_a_run_validates_against_the_schema(quick):
    assert quick.returncode == 0
    data = quick.report  # validated against the schema as it was read
    SCHEMA_VALIDATOR.validate(data)
    (benchmark,) = data["benchmarks"]
    assert benchmark["network"] == "Sh" and benchmark["images"] == 16
    assert benchmark["compliant"] is False and data["compliant"] is False
    assert (data["options"]["profile"], data["options"]["images"]) == ("quick", None)
    assert data["verification"]["networks"][0]["verdict"] == "correct"
    assert data["peak"]["estimated"] is True
    # Every factor of the peak stands beside the ratio.
    peak = data["peak"]
    assert peak["macs_per_second"] == pytest.approx(
        peak["units"] * peak["clock_hz"] * peak["macs_per_cycle_per_unit"]
    )


def test_quick_results_are_labelled_non_compliant_wherever_shown(quick):
    assert quick.returncode == 0
    data = quick.report
    designations = [b["designation"] for b in data["benchmarks"]]
    assert designations and all(d.endswith(" (quick, non-compliant)") for d in designations)
    assert [e["designation"] for e in data["evaluations"]] == [
        "ОП-П-float32-B1-N1 (quick, non-compliant)"
    ]
    # The section 9 summary's layout: the warning, the table with its labelled row, and
    # the labelled evaluation.
    output(quick).fnmatch_lines(
        [
            "*GOST R 57700.36-2021, section 9: performance*",
            "QUICK PROFILE: NOT COMPLIANT (*",
            "test *images *time s *images/s *MAC/s *ОРП %",
            "ТП-Ш-П-float32-B1 (quick, non-compliant) *",
            "evaluation ОП-П-float32-B1-N1 (quick, non-compliant):",
        ],
    )


def test_an_image_count_runs_ceil_n_over_b_rounds_and_says_it_is_not_compliant(pytester):
    report = pytester.path / "report.json"
    batch_2 = (
        "--gost-backend=numpy",
        "--gost-batch=2",
        "--gost-networks=Sh",
        "--gost-mode=inference",
    )
    result = run(
        pytester, *batch_2, "--gost-images=5", "-k", "test_benchmark", f"--gost-report={report}"
    )
    assert result.ret == 0
    data = read_report(report)
    assert (data["options"]["profile"], data["options"]["images"]) == (None, 5)
    (benchmark,) = data["benchmarks"]
    assert (benchmark["rounds"], benchmark["images"]) == (3, 6)  # ceil(5 / 2) rounds of 2
    assert benchmark["designation"] == "ТП-Ш-П-float32-B2 (images=5, non-compliant)"
    reason = "--gost-images=5: section 9.3 requires 1,000,000 images per cell"
    assert benchmark["noncompliance_reasons"][0].startswith(reason)
    assert data["compliant"] is False and data["noncompliance_reasons"][0].startswith(reason)
    result.stdout.fnmatch_lines(
        [
            "gostcnn: backend numpy *; images 5 per test (3 rounds of 2; no profile)",
            "*GOST R 57700.36-2021, section 9: performance*",
            "IMAGES=5: NOT COMPLIANT (section 9.3 requires 1,000,000 images per cell; *)",
            "ТП-Ш-П-float32-B2 (images=5, non-compliant) * 6 *",
            "  checks: 3 of 3 rounds (each with chance 1, drawn after it delivered): passed*",
            "evaluation ОП-П-float32-B2-N1 (images=5, non-compliant):",
            "GOST R 57700.36-2021: verification PASSED: *",
            "GOST R 57700.36-2021: inference evaluation ОП-П-float32-B2-N1 (images=5, "
            "non-compliant): incomplete, no result for *: NOT COMPLIANT (images=5; *)",
        ]
    )


def test_canonical_set_results_are_labelled_with_its_name_and_never_compliant(pytester):
    report = pytester.path / "report.json"
    result = run(pytester, *NUMPY_SMALL, "--gost-tables=canonical", f"--gost-report={report}")
    assert result.ret == 0
    data = read_report(report)
    assert data["options"]["table_set"] == "canonical"
    assert data["options"]["tables_provenance"] == ["canonical"]
    (benchmark,) = data["benchmarks"]
    assert benchmark["designation"] == "ТП-Ш-П-float32-B1 (canonical set, quick, non-compliant)"
    assert benchmark["table_set"] == "canonical"
    assert benchmark["compliant"] is False and data["compliant"] is False
    result.stdout.fnmatch_lines(
        [
            "gostcnn: tables canonical; networks Ш (Sh, shipped canonical)",
            "*GOST R 57700.36-2021, section 8: verification*",
            "backend numpy *; weights scaled; tables canonical",
            "*GOST R 57700.36-2021, section 9: performance*",
            "QUICK PROFILE: NOT COMPLIANT (*",
            "CANONICAL SET: NOT COMPLIANT (*not the standard's typical networks)",
            "ТП-Ш-П-float32-B1 (canonical set, quick, non-compliant) *",
            "evaluation ОП-П-float32-B1-N1 (canonical set, quick, non-compliant):",
            "  not compliant: tables: the canonical set, * not the standard's typical networks *",
        ]
    )
    assert any("not the standard's typical networks" in r for r in data["noncompliance_reasons"])


def test_complete_evaluation_drops_the_smallest_and_gives_both_results(pytester):
    # The six tiny tables (tests/gost_helpers.py): the evaluation's arithmetic and layout are
    # the same as the shipped networks', in a second instead of eight.
    report = directory(pytester.path) / "report.json"
    result = run(
        pytester,
        "--gost-backend=numpy",
        "--gost-tables=tiny",
        "--gost-batch=1",
        "--gost-mode=inference",
        "--gost-peak=1T",
        "-k",
        "test_network or test_benchmark",
        f"--gost-report={report}",
    )
    assert result.ret == 0
    data = read_report(report)
    assert data["peak"]["macs_per_second"] == 1e12
    assert data["peak"]["source"] == "given (--gost-peak)" and data["peak"]["estimated"] is False
    (evaluation,) = data["evaluations"]
    results = evaluation["results_percent"]
    assert evaluation["complete"] and len(results) == 6 and evaluation["missing"] == []
    assert evaluation["dropped"] == min(results, key=results.get)
    kept = [value for latin, value in results.items() if latin != evaluation["dropped"]]
    assert evaluation["first_result_percent"] == pytest.approx(sum(kept) / 5)
    assert evaluation["second_result_macs_per_second"] == pytest.approx(
        evaluation["first_result_percent"] * 1e12 / 100
    )
    # The evaluation block's layout, below the given (not estimated) peak.
    result.stdout.fnmatch_lines(["cell peak (float32): 1 TMAC/s (given (--gost-peak))"])
    result.stdout.fnmatch_lines(
        [
            "evaluation ОП-П-float32-B1-N1 (quick, non-compliant):",
            "  results (ОРП): М *%, Г *%, В *%, С *%, Р *%, Ш *%",
            "  dropped (smallest): * (*) *%",
            "  first result: * %",
            "  second result: *MAC/s",
        ],
        consecutive=True,
    )


def test_benchmark_marker_selects_only_the_timed_tests(pytester):
    report = pytester.path / "report.json"
    timed = recorded(pytester, *NUMPY_SMALL, "-m", "gost_benchmark", f"--gost-report={report}")
    assert timed.outcomes() == {"passed": 1}
    assert [item.rpartition("::")[2] for item in timed.items] == ["test_benchmark[Sh-inference-B1]"]
    # The network was verified first, inside the benchmark item: section 9 needs it.
    data = read_report(report)
    assert [(n["network"], n["mode"], n["verdict"]) for n in data["verification"]["networks"]] == [
        ("Sh", "inference", "correct")
    ]
    assert len(data["benchmarks"]) == 1
    excluded = in_process(
        pytester, *NUMPY_SMALL, "-m", "not gost_benchmark", "--collect-only", "-q"
    )
    assert excluded.items
    assert not [item for item in excluded.items if "test_benchmark" in item]


def test_benchmark_of_a_network_that_failed_verification_is_skipped(pytester, backends):
    report = pytester.path / "report.json"
    timed = recorded(
        pytester,
        "--gost-backend=mymod:WrongSign",
        "--gost-batch=1",
        "--gost-networks=Sh",
        "--gost-mode=training",
        "-k",
        "test_network or test_benchmark",
        f"--gost-report={report}",
    )
    assert timed.outcomes() == {"failed": 1, "skipped": 1}
    (reason,) = timed.longreprs("skipped").values()
    assert "not verified correct in this session" in reason
    data = read_report(report)
    assert data["benchmarks"] == []
    (evaluation,) = data["evaluations"]
    assert evaluation["complete"] is False and "Sh" in evaluation["missing"]


@pytest.mark.parametrize(
    ("option", "says"),
    [
        ("--gost-peak=0", "--gost-peak=0: the peak must be a positive number of MAC/s"),
        ("--gost-peak=fast", "--gost-peak=fast: the peak must be a positive number"),
        ("--gost-profile=medium", "--gost-profile=medium: choose one of quick, full"),
        ("--gost-report=/nonexistent/dir/r.json", "--gost-report=/nonexistent/dir/r.json:"),
        ("--gost-report=r.json/", "--gost-report=r.json/: is a directory; give a file name"),
        ("--gost-report=", "--gost-report=: empty; give a file name"),
        ("--gost-report=~no-such-user-here/r.json", "--gost-report=~no-such-user-here/r.json:"),
        ("--gost-tables=", "--gost-tables: an empty name; give a directory of network tables"),
        ("--gost-peak=1e-3", "--gost-peak=1e-3: a peak below 1 MAC/s"),
    ],
)
def test_bad_section_9_option_is_one_usage_error(pytester, option, says):
    result = pytester.runpytest("--gost-backend=numpy", option)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert says in result.stderr.str()


def test_report_write_is_atomic_and_leaves_no_partial_file(tmp_path, monkeypatch):
    path = tmp_path / "report.json"
    write_report(path, {"a": 1})
    assert json.loads(path.read_text()) == {"a": 1}
    # A report that cannot be serialised (NaN) leaves the previous file whole.
    with pytest.raises(ValueError):
        write_report(path, {"a": float("nan")})

    # So does a failure after the temporary file was written (here: the rename).
    def refuse(*args):
        raise OSError("disk full")

    monkeypatch.setattr("pytest_gostcnn.reports.files.os.replace", refuse)
    with pytest.raises(OSError):
        write_report(path, {"a": 2})
    assert json.loads(path.read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]


def test_report_gets_a_new_files_usual_mode_not_a_private_temporary_files(tmp_path):
    path = tmp_path / "report.json"
    umask = os.umask(0o022)
    try:
        write_report(path, {"a": 1})
    finally:
        os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_report_keeps_the_mode_of_the_file_it_replaces(tmp_path):
    path = tmp_path / "report.json"
    path.write_text("{}")
    path.chmod(0o640)
    write_report(path, {"a": 1})
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


def test_report_with_a_long_name_is_written(tmp_path):
    path = tmp_path / ("r" * 250 + ".json")  # 255 characters: the longest name a folder takes
    write_report(path, {"a": 1})
    assert json.loads(path.read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


def test_report_through_a_symbolic_link_replaces_the_file_the_link_names(pytester):
    real = pytester.path / "reports" / "real.json"
    real.parent.mkdir()
    real.write_text("old")
    link = pytester.path / "link.json"
    link.symlink_to(real)

    result = pytester.runpytest_inprocess(
        *NUMPY_SMALL, "-k", "concat-forward-L3", f"--gost-report={link}", "-p", "no:cacheprovider"
    )

    assert result.ret == 0
    assert link.is_symlink()
    SCHEMA_VALIDATOR.validate(json.loads(real.read_text(encoding="utf-8")))


def test_report_path_that_is_not_a_regular_file_is_refused_before_the_run(pytester):
    fifo = pytester.path / "pipe"
    os.mkfifo(fifo)  # as /dev/null would be: the rename would replace it

    result = pytester.runpytest(*NUMPY_SMALL, f"--gost-report={fifo}")

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"--gost-report={fifo}: exists and is not a regular file" in result.stderr.str()


def test_report_folder_that_cannot_be_written_is_refused_before_the_run(pytester, monkeypatch):
    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("pytest_gostcnn.run.option_parsers.tempfile.mkstemp", refuse)
    result = pytester.runpytest(*NUMPY_SMALL, f"--gost-report={pytester.path / 'r.json'}")

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"cannot write in {pytester.path}: Permission denied" in result.stderr.str()


def test_report_path_with_a_tilde_is_written_in_the_home_directory(pytester, monkeypatch):
    home = pytester.path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))

    result = pytester.runpytest_inprocess(
        *NUMPY_SMALL, "-k", "concat-forward-L3", "--gost-report=~/r.json", "-p", "no:cacheprovider"
    )

    assert result.ret == 0
    SCHEMA_VALIDATOR.validate(json.loads((home / "r.json").read_text(encoding="utf-8")))


def test_an_orp_above_100_percent_fails_the_test_and_counts_in_no_evaluation(pytester):
    report = pytester.path / "report.json"
    result = run(
        pytester,
        *NUMPY_SMALL,
        "--gost-peak=1",
        "-k",
        "test_network or test_benchmark",
        f"--gost-report={report}",
    )

    assert result.ret == pytest.ExitCode.TESTS_FAILED
    # One line names the peak, where it came from, the backend's measured rate (above a
    # peak of 1 MAC/s too) and both ways out.
    result.stdout.fnmatch_lines(
        [
            "*ТП-Ш-П-float32-B1: ОРП * % is above 100 % of the cell peak 1 MAC/s (given "
            "(--gost-peak)); the backend's own kernel ran at *MAC/s before the rounds: not a "
            "result. Either the peak is wrong (check the value given to --gost-peak) or the "
            "backend's rounds end before its work does*",
            "ОРП ABOVE 100 % (Ш (Sh) inference): *those tests failed and count in no evaluation*",
        ]
    )
    whole = read_report(report)
    (benchmark,) = whole["benchmarks"]
    assert benchmark["orp_percent"] > 100
    assert not benchmark["compliant"]
    assert any("above 100 % of the cell peak" in r for r in benchmark["noncompliance_reasons"])
    (evaluation,) = whole["evaluations"]
    assert not evaluation["compliant"]
    assert "Sh" not in evaluation["results_percent"]  # not a result
    # check judges the report again and agrees; with the reason removed it does not.
    assert check_report(whole) == []
    benchmark["noncompliance_reasons"] = [
        r for r in benchmark["noncompliance_reasons"] if "above 100" not in r
    ]
    assert check_report(whole) != []


class InternalErrors:
    """A plugin for an in-process run: the internal errors (crashes) pytest met."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def pytest_internalerror(self, excrepr) -> None:
        self.seen.append(str(excrepr))


def test_an_unwritable_report_is_one_clear_line_not_a_crash(pytester, monkeypatch):
    def refuse(*args):
        raise OSError("disk full")

    monkeypatch.setattr("pytest_gostcnn.reports.files.os.replace", refuse)
    report = pytester.path / "r.json"
    crashes = InternalErrors()
    result = pytester.runpytest(
        *NUMPY_SMALL, "-k", "concat-forward-L3", f"--gost-report={report}", plugins=[crashes]
    )
    # The plugin's one line; neither a crash pytest reports nor an exception escaping it.
    result.stdout.fnmatch_lines([f"gostcnn: could not write --gost-report={report}: *disk full*"])
    assert crashes.seen == []
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR and not report.exists()


def test_a_report_that_cannot_be_written_mid_run_stops_it_at_once_with_exit_3(
    pytester, monkeypatch
):
    # Three tiny performance tests: the first checkpoint is written, the second is not
    # (the folder went away, a disk filled), and the third must not run.
    directory(pytester.path)
    writes, replace = [], os.replace

    def second_fails(source, target):
        writes.append(target)
        if len(writes) > 1:
            raise OSError("disk full")
        replace(source, target)

    monkeypatch.setattr("pytest_gostcnn.reports.files.os.replace", second_fails)
    report = pytester.path / "r.json"
    tiny = ("--gost-tables=tiny", "--gost-batch=1", "--gost-mode=inference")
    result = pytester.runpytest(
        "--gost-backend=numpy",
        *tiny,
        "--gost-networks=M,G,V",
        "-m",
        "gost_benchmark",
        f"--gost-report={report}",
        "-p",
        "no:cacheprovider",
    )
    reports = result.reprec.getreports("pytest_runtest_logreport")
    ran = [r.nodeid for r in reports if r.when == "call"]
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR
    assert len(ran) == 2 and len(writes) == 2  # no third test, no write at the end
    data = read_report(report)  # the first checkpoint, whole
    assert [b["network"] for b in data["benchmarks"]] == ["M"]
    assert data["run"]["complete"] is False
    result.stdout.fnmatch_lines(
        [
            f"gostcnn: exit status 3: the run stopped at once: could not write "
            f"--gost-report={report}: *disk full; {report} keeps the 1 performance test "
            "finished before (ТП-М-П-float32-B1); *"
        ]
    )


def test_an_unavailable_backend_still_gets_its_report(pytester, backends):
    report = pytester.path / "r.json"
    result = run(pytester, "--gost-backend=mymod:NoDevice", *SMALL, f"--gost-report={report}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # nothing was verified
    data = read_report(report)
    assert data["system"]["backend"]["unavailable"] == "no CUDA device"
    assert data["compliant"] is False and data["benchmarks"] == []
    assert data["exit_status"] == result.ret and "no CUDA device" in data["exit_reason"]


def test_benchmark_options_that_the_suite_honours_are_not_refused(quick):
    # pytest-benchmark's JSON holds every timed round of the suite's loop, the options they
    # were timed with and, with --benchmark-cprofile, the profile of one round after them.
    assert quick.returncode == 0
    path = quick.path / "benchmark.json"
    (timed,) = json.loads(path.read_text(encoding="utf-8"))["benchmarks"]
    assert timed["options"]["disable_gc"] is True
    # The rounds are the suite's: the quick profile's 16 images at batch 1.
    assert timed["stats"]["rounds"] == 16 and len(timed["stats"]["data"]) == 16
    assert timed["extra_info"]["images"] == 16
    assert any("infer" in row["function_name"] for row in timed["cprofile"])


def test_disabled_benchmarks_say_nothing_was_timed(pytester):
    report = pytester.path / "r.json"
    timed = in_process(pytester, *NUMPY_SMALL, "--benchmark-disable", f"--gost-report={report}")
    # A skipped item is not one that ran and passed: the run does not exit 0.
    assert timed.ret == pytest.ExitCode.TESTS_FAILED
    (reason,) = timed.longreprs("skipped").values()
    assert "pytest-benchmark is disabled" in reason and "nothing was timed" in reason
    assert read_report(report)["benchmarks"] == []
    timed.result.stdout.fnmatch_lines(["nothing was timed: no performance test finished*"])


def test_a_run_prints_its_estimate_before_timing_and_each_tests_spread_after(quick):
    assert quick.returncode == 0
    # In order: the run's total, printed before the first timed round; the test's result
    # in the section 9 table; the spread of its rounds beside its check line.
    output(quick).fnmatch_lines(
        [
            "gostcnn: run estimate: about * for the rounds of 1 benchmark test (1 from its own "
            "warm-up)*",
            "ТП-Ш-П-float32-B1 (quick, non-compliant) *",
            "  checks: * of * rounds (each with chance 1, drawn after it delivered): passed*",
            "  rounds: median * s, slowest round *x the median, mean (the ОРП's) * % * the median*",
        ]
    )


def test_an_int8_run_verifies_times_and_checks_under_its_scales(pytester):
    # docs/standard.md §6: int8 inference verified under the fixed-point model, then timed
    # (calibrated scales, checks under them) against a given integer peak.
    report = pytester.path / "report.json"
    args = ("--gost-dtype=int8", "--gost-peak=1T", "-k", "network or benchmark")
    result = run(pytester, *NUMPY_SMALL, *args, f"--gost-report={report}")
    assert result.ret == 0, result.stdout.str()[-2000:]
    data = read_report(report)
    (network,) = data["verification"]["networks"]
    assert network["verdict"] == "correct" and set(network["scales"]) >= {"1"}
    (benchmark,) = data["benchmarks"]
    assert benchmark["designation"].startswith("ТП-Ш-П-int8-B1")
    assert all(check["passed"] for cell in benchmark["cells"] for check in cell["checks"])
