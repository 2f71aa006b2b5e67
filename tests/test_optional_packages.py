"""The README's test command passes with only what ``.[test]`` installs: the tests that need
an optional package skip, naming it, and none of them breaks collection without it."""

import os
import subprocess
import sys

from gost_helpers import REPOSITORY

OPTIONAL = ("torch", "onnx", "onnxruntime", "cupy", "mpi4py")

# Loaded at start-up from PYTHONPATH: each name in sys.modules as None makes its import
# raise ModuleNotFoundError and importlib.util.find_spec return None, as if not installed.
HIDES = "import sys\nsys.modules.update(dict.fromkeys({names!r}))\n"


def test_plain_pytest_here_collects_the_projects_tests_without_any_optional_package(tmp_path):
    # Plain pytest in the repository: its own tests (testpaths), not the shipped suite.
    (tmp_path / "sitecustomize.py").write_text(HIDES.format(names=OPTIONAL), "utf-8")
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}

    done = subprocess.run(command, cwd=REPOSITORY, env=env, capture_output=True, text=True)

    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    *items, _, last = done.stdout.splitlines()
    assert " tests collected" in last
    assert items and all(item.startswith("tests/") for item in items), items[:3]


def test_ci_runs_the_readmes_test_command_before_it_installs_anything_more():
    readme = (REPOSITORY / "README.md").read_text(encoding="utf-8")
    command = next(line for line in readme.splitlines() if "'.[test]'" in line)
    ci = (REPOSITORY / ".ci" / "run").read_text(encoding="utf-8")
    lines = [line.strip() for line in ci.splitlines() if not line.lstrip().startswith("#")]

    runs = [i for i, line in enumerate(lines) if line.startswith(command)]
    assert runs, f".ci/run does not run the README's {command!r}"
    before = lines[: runs[0]]
    assert not [line for line in before if "install" in line], before
