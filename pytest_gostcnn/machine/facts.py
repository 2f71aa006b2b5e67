"""What the machine is, for headers, peaks and the report."""

from __future__ import annotations

import platform
import subprocess
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

# The checkout an editable install runs from: machine/ -> pytest_gostcnn/ -> the root.
CHECKOUT = Path(__file__).resolve().parents[2]

LIBRARIES = ("numpy", "pytest", "pytest-benchmark", "pyyaml", "pytest-gostcnn", "cupy", "mpi4py")


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, else what the platform module knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def libraries() -> dict[str, str]:
    """The installed versions of the libraries a run depends on (absent ones left out)."""
    found = {}
    for package in LIBRARIES:
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            continue
    return found


def suite_source(checkout: Path = CHECKOUT) -> dict:
    """The suite's version, and when it runs from a git checkout, its commit and whether
    tracked files differ from it (None for both otherwise)."""
    try:
        suite = version("pytest-gostcnn")
    except PackageNotFoundError:
        suite = None
    found = {"version": suite, "commit": None, "modified": None}
    if not ((checkout / ".git").exists() and (checkout / "pyproject.toml").exists()):
        return found
    try:
        commit = _git(checkout, "rev-parse", "HEAD")
        status = _git(checkout, "status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return found
    return {**found, "commit": commit, "modified": bool(status)}


def _git(checkout: Path, *arguments: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(checkout), *arguments],
        capture_output=True,
        text=True,
        timeout=10,
        check=True,
    )
    return done.stdout.strip()
