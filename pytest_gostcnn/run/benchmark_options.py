"""pytest-benchmark's options as the suite meets them (docs/benchmarking.md).

The suite runs and times each test's rounds in its own loop (``performance/loop.py``), exactly
the rounds the test has, and hands their seconds to pytest-benchmark
(``plugin/benchmark_fixture.py``): the options that calibrate or extend pytest-benchmark's own
loop have nothing to act on, so they are refused rather than silently ignored. An option counts
as given when it is among the arguments pytest parsed, whatever its value (even the
default's: the user asked for it). Nothing here imports pytest.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence

_ROUNDS = "the GOST suite fixes each test's rounds from its image count (section 9.3)"
_ONE_ROUND = (
    "the GOST suite times each round (one batch through the network) once, without "
    "pytest-benchmark's calibration"
)
_WARMUP = (
    "the GOST suite runs one untimed warm-up round of its own before each test's timed "
    "rounds, not pytest-benchmark's calibration warm-up"
)
# Each option of pytest-benchmark's own loop, and why the suite cannot honour it.
NOT_HONOURED = {
    "--benchmark-min-rounds": f"{_ROUNDS}; use --gost-images=N",
    "--benchmark-max-time": f"{_ROUNDS}, however long they take; use --gost-images=N",
    "--benchmark-min-time": _ONE_ROUND,
    "--benchmark-calibration-precision": _ONE_ROUND,
    "--benchmark-precision": f"{_ROUNDS}, not until a precision is reached; use --gost-images=N",
    "--benchmark-confidence": (
        "the GOST suite runs no --benchmark-precision, the option this one goes with"
    ),
    "--benchmark-warmup": _WARMUP,
    "--benchmark-warmup-iterations": _WARMUP,
    "--benchmark-cprofile-loops": (
        "the GOST suite profiles one round after a test's timed rounds with "
        "--benchmark-cprofile, neither timed nor checked: one, not a number of loops"
    ),
}
HISTOGRAM_PACKAGES = ("pygal", "pygaljs")


def refused_option(arguments: Sequence[str]) -> str | None:
    """The first option among ``arguments`` that the suite cannot honour, as written, with
    why; None when there is none."""
    for index, argument in enumerate(arguments):
        flag = argument.partition("=")[0]
        if flag not in NOT_HONOURED:
            continue
        written = argument
        following = arguments[index + 1] if index + 1 < len(arguments) else None
        if "=" not in argument and following is not None and not following.startswith("-"):
            written = f"{flag}={following}"  # given as "--benchmark-min-rounds 50"
        return f"{written}: {NOT_HONOURED[flag]}"
    return None


def missing_histogram_packages() -> list[str]:
    """The packages ``--benchmark-histogram`` needs that cannot be imported here."""
    missing = []
    for package in HISTOGRAM_PACKAGES:
        try:
            importlib.import_module(package)
        except ImportError:
            missing.append(package)
    return missing


def histogram_error(missing: Sequence[str]) -> str:
    """The one line that refuses ``--benchmark-histogram`` without its packages."""
    return (
        f"--benchmark-histogram: pytest-benchmark draws it with {' and '.join(HISTOGRAM_PACKAGES)}"
        f", and {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not installed; "
        f"pip install {' '.join(HISTOGRAM_PACKAGES)} (or pytest-benchmark[histogram]), or "
        "drop the option"
    )
