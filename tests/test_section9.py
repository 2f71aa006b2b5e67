"""Section 9 as a user meets it: benchmark items, the evaluation, and the JSON report."""

import json
import os
import stat
from pathlib import Path

import jsonschema
import pytest

from pytest_gostcnn.plugin.report import write_report

pytest_plugins = ["pytester"]

SCHEMA = json.loads(
    (Path(__file__).parent.parent / "docs" / "report.schema.json").read_text(encoding="utf-8")
)
SMALL = ("--gost-backend=numpy", "--gost-batch=1", "--gost-networks=Sh", "--gost-mode=inference")

WRONG = """
from pytest_gostcnn.backends.numpy import NumpyBackend


class WrongSign(NumpyBackend):
    def update(self, layer, weights, grads, batch):
        for name, grad in grads.items():
            weights[name] -= grad / batch
"""


def run(pytester, *args):
    return pytester.runpytest_subprocess(*args, "-p", "no:cacheprovider")


def test_report_of_a_run_validates_against_the_schema(pytester):
    report = pytester.path / "report.json"
    result = run(pytester, *SMALL, f"--gost-report={report}")
    assert result.ret == 0
    data = json.loads(report.read_text(encoding="utf-8"))
    jsonschema.validate(data, SCHEMA)
    (benchmark,) = data["benchmarks"]
    assert benchmark["network"] == "Sh" and benchmark["images"] == 16
    assert benchmark["compliant"] is False and data["compliant"] is False
    assert data["verification"]["networks"][0]["verdict"] == "correct"
    assert data["peak"]["estimated"] is True
    # Every factor of the peak stands beside the ratio.
    peak = data["peak"]
    assert peak["macs_per_second"] == pytest.approx(
        peak["units"] * peak["clock_hz"] * peak["macs_per_cycle_per_unit"]
    )


def test_quick_results_are_labelled_non_compliant_wherever_shown(pytester):
    result = run(pytester, *SMALL)
    text = result.stdout.str()
    assert "QUICK PROFILE: NOT COMPLIANT" in text
    designations = [line for line in result.stdout.lines if line.startswith("ТП-")]
    assert designations and all("(quick, non-compliant)" in line for line in designations)
    assert "ОП-П-float32-B1-N1 (quick, non-compliant):" in text


def test_complete_evaluation_drops_the_smallest_and_gives_both_results(pytester):
    result = run(
        pytester,
        "--gost-backend=numpy",
        "--gost-batch=1",
        "--gost-mode=inference",
        "--gost-peak=1T",
        "-k",
        "test_network or test_benchmark",
    )
    assert result.ret == 0
    text = result.stdout.str()
    assert "dropped (smallest):" in text
    assert "first result:" in text and "second result:" in text and "MAC/s" in text
    assert "cell peak (float32): 1 TMAC/s (given (--gost-peak))" in text
    assert "ESTIMATED" not in text


def test_benchmark_marker_selects_only_the_timed_tests(pytester):
    result = run(pytester, *SMALL, "-m", "gost_benchmark")
    result.assert_outcomes(passed=1)
    # The network was verified first, inside the benchmark item: section 9 needs it.
    assert "Ш (Sh)   inference  correct" in result.stdout.str()
    excluded = run(pytester, *SMALL, "-m", "not gost_benchmark", "--collect-only", "-q")
    assert not [line for line in excluded.stdout.lines if "test_benchmark" in line]


def test_benchmark_of_a_network_that_failed_verification_is_skipped(pytester, monkeypatch):
    pytester.makepyfile(wrongmod=WRONG)
    monkeypatch.setenv("PYTHONPATH", str(pytester.path))
    result = run(
        pytester,
        "--gost-backend=wrongmod:WrongSign",
        "--gost-batch=1",
        "--gost-networks=Sh",
        "--gost-mode=training",
        "-k",
        "test_network or test_benchmark",
        "-rs",
    )
    result.assert_outcomes(failed=1, skipped=1)
    assert "not verified correct in this session" in result.stdout.str()
    assert "incomplete: no result for" in result.stdout.str()


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
    assert any(says in line for line in result.stderr.lines)


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

    monkeypatch.setattr("pytest_gostcnn.plugin.report.os.replace", refuse)
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

    result = run(pytester, *SMALL, "-k", "concat-forward", f"--gost-report={link}")

    assert result.ret == 0
    assert link.is_symlink()
    jsonschema.validate(json.loads(real.read_text(encoding="utf-8")), SCHEMA)


def test_report_path_that_is_not_a_regular_file_is_refused_before_the_run(pytester):
    fifo = pytester.path / "pipe"
    os.mkfifo(fifo)  # as /dev/null would be: the rename would replace it

    result = pytester.runpytest(*SMALL, f"--gost-report={fifo}")

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"--gost-report={fifo}: exists and is not a regular file" in result.stderr.str()


def test_report_folder_that_cannot_be_written_is_refused_before_the_run(pytester, monkeypatch):
    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("pytest_gostcnn.plugin.options.tempfile.mkstemp", refuse)
    result = pytester.runpytest(*SMALL, f"--gost-report={pytester.path / 'r.json'}")

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"cannot write in {pytester.path}: Permission denied" in result.stderr.str()


def test_report_path_with_a_tilde_is_written_in_the_home_directory(pytester, monkeypatch):
    home = pytester.path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))

    result = run(pytester, *SMALL, "-k", "concat-forward", "--gost-report=~/r.json")

    assert result.ret == 0
    jsonschema.validate(json.loads((home / "r.json").read_text(encoding="utf-8")), SCHEMA)


def test_a_peak_below_the_measured_rate_is_called_wrong_in_the_summary(pytester):
    result = run(pytester, *SMALL, "--gost-peak=1", "-k", "test_network or test_benchmark")

    assert result.ret == 0
    assert "ОРП ABOVE 100 % (Ш (Sh) inference): a test ran faster than the cell peak" in (
        result.stdout.str()
    )


def test_an_unwritable_report_is_one_clear_line_not_a_crash(pytester, monkeypatch):
    def refuse(*args):
        raise OSError("disk full")

    monkeypatch.setattr("pytest_gostcnn.plugin.report.os.replace", refuse)
    report = pytester.path / "r.json"
    result = pytester.runpytest(*SMALL, "-k", "concat-forward", f"--gost-report={report}")
    assert "gostcnn: could not write --gost-report=" in result.stdout.str()
    assert "disk full" in result.stdout.str()
    assert "INTERNALERROR" not in result.stdout.str()
    assert result.ret != 0 and not report.exists()


def test_an_unavailable_backend_still_gets_its_report(pytester, monkeypatch):
    pytester.makepyfile(
        nodevice="""
from pytest_gostcnn.backends.numpy import NumpyBackend


class NoDevice(NumpyBackend):
    @classmethod
    def unavailable_reason(cls):
        return "no CUDA device"
"""
    )
    monkeypatch.setenv("PYTHONPATH", str(pytester.path))
    report = pytester.path / "r.json"
    result = run(
        pytester, "--gost-backend=nodevice:NoDevice", *SMALL[1:], f"--gost-report={report}"
    )
    assert result.ret == 0
    data = json.loads(report.read_text(encoding="utf-8"))
    jsonschema.validate(data, SCHEMA)
    assert data["system"]["backend"]["unavailable"] == "no CUDA device"
    assert data["compliant"] is False and data["benchmarks"] == []


def test_disabled_benchmarks_say_nothing_was_timed(pytester):
    result = run(pytester, *SMALL, "--benchmark-disable", "-rs")
    assert result.ret == 0
    assert "pytest-benchmark is disabled" in result.stdout.str()
    assert "nothing was timed" in result.stdout.str()
