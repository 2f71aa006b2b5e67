"""What the package holds once installed: reference/ and backends/ from the repository root
mapped into it, and no other folder of the repository (docs/architecture.md)."""

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from gost_helpers import REPOSITORY

import pytest_gostcnn


@pytest.mark.parametrize("name", ["reference", "backends"])
def test_the_root_folders_install_inside_the_package(name):
    spec = importlib.util.find_spec(f"pytest_gostcnn.{name}")

    assert spec is not None and Path(spec.origin).parent.name == name


@pytest.mark.parametrize("name", ["tests", "tools", "benchmarks"])
def test_no_other_folder_of_the_repository_imports_through_the_package(name):
    assert (REPOSITORY / name).is_dir()  # the folder is there; the package does not reach it
    assert importlib.util.find_spec(f"pytest_gostcnn.{name}") is None


def test_the_package_without_reference_beside_it_is_one_clear_error(tmp_path):
    # A checkout on PYTHONPATH, not installed: the package alone, nothing mapped into it
    # (or, in an editable install, another tree's reference/).
    package = Path(pytest_gostcnn.__file__).parent
    shutil.copytree(package, tmp_path / "pytest_gostcnn", ignore=shutil.ignore_patterns("*.pyc"))
    code = f"import sys; sys.path.insert(0, {str(tmp_path)!r}); import pytest_gostcnn"

    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)

    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: pytest_gostcnn.reference ")
    assert "pip install -e " in last
