"""``--gost-report`` refused before any work runs where the run could not write it, or would
write over what it reads: one line naming the option, its value and why; exit 4."""

import os

import pytest
from gost_helpers import SMALL, usage_error

from pytest_gostcnn.run.option_parsers import report_path

pytest_plugins = ["pytester"]

NUMPY_SMALL = ("--gost-backend=numpy", *SMALL)


def test_a_report_in_a_folder_that_does_not_exist_is_refused(pytester):
    result = pytester.runpytest(*NUMPY_SMALL, "--gost-report=absent/r.json")
    usage_error(result, "--gost-report=absent/r.json: the folder ", "absent does not exist")


def test_a_report_under_a_file_is_refused_naming_the_file(pytester):
    pytester.path.joinpath("notes.txt").write_text("mine")
    result = pytester.runpytest(*NUMPY_SMALL, "--gost-report=notes.txt/r.json")
    usage_error(result, "--gost-report=notes.txt/r.json: the folder ", "is a file, not a folder")


def test_a_read_only_report_file_is_refused_not_written_over(pytester, monkeypatch):
    kept = pytester.path / "kept.json"
    kept.write_text("{}")
    real = os.access  # as root every file is writable: the permission is said, not set

    def access(path, mode, *args, **kwargs):
        if os.fspath(path) == str(kept) and mode & os.W_OK:
            return False
        return real(path, mode, *args, **kwargs)

    monkeypatch.setattr("pytest_gostcnn.run.option_parsers.os.access", access)
    result = pytester.runpytest(*NUMPY_SMALL, f"--gost-report={kept}")
    usage_error(result, f"--gost-report={kept}: the file is read-only; give another name")
    assert kept.read_text() == "{}"


def test_a_report_file_without_write_permission_is_refused_even_to_root(tmp_path):
    # os.access lets root write anything; a file chmod a-w is read-only to root too.
    kept = tmp_path / "kept.json"
    kept.write_text("{}")
    kept.chmod(0o444)
    with pytest.raises(ValueError, match=r"kept.json: the file is read-only; give another name"):
        report_path("--gost-report", str(kept))


def test_a_report_that_is_the_baseline_it_is_compared_with_is_refused(pytester):
    pytester.path.joinpath("runs").mkdir()
    baseline = pytester.path / "base.json"
    baseline.write_text("{}")  # refused before the baseline is read
    # The same file by another road: ./runs/../base.json.
    result = pytester.runpytest(
        *NUMPY_SMALL, "--gost-compare=base.json", "--gost-report=runs/../base.json"
    )
    usage_error(
        result, f"--gost-report={baseline}: the --gost-compare baseline itself", "another name"
    )
    assert baseline.read_text() == "{}"


def test_a_report_linked_to_the_baseline_is_the_baseline(pytester):
    baseline = pytester.path / "base.json"
    baseline.write_text("{}")
    os.link(baseline, pytester.path / "hard.json")
    result = pytester.runpytest(*NUMPY_SMALL, "--gost-compare=base.json", "--gost-report=hard.json")
    usage_error(result, "--gost-report=", "hard.json: the --gost-compare baseline itself")
