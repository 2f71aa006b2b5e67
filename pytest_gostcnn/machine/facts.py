"""What the machine is, for headers, peaks and the report."""

from __future__ import annotations

import platform
from importlib.metadata import PackageNotFoundError, version

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
