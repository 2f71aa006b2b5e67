"""pytest-benchmark's fixture, as a section 9 test uses it: the one module that touches it.

The suite's own loop (``performance/loop.py``) runs and times a test's rounds, with the
fixture's timer (``--benchmark-timer``) and its garbage-collector setting
(``--benchmark-disable-gc``); the rounds' seconds then become the fixture's statistics, one
round each, so that pytest-benchmark's table, ``--benchmark-json``,
``--benchmark-compare``, ``--benchmark-histogram`` and ``--benchmark-autosave`` show the
test's timed rounds. ``--benchmark-cprofile`` profiles one more round after them, neither
timed nor checked (``--benchmark-cprofile-loops`` is refused: there is one such round). The
options that would calibrate or extend pytest-benchmark's own loop are refused at start-up
(``run/benchmark_options.py``).

pytest-benchmark gives no public call for statistics timed elsewhere: this reads and calls
its fixture's ``_timer``, ``_disable_gc``, ``_make_stats`` and ``_save_cprofile``, as its
``pedantic`` does, and sets its ``_mode`` as used.
"""

from __future__ import annotations

import cProfile
from collections.abc import Sequence

from pytest_gostcnn.performance.loop import Clock

# What pytest-benchmark says of a fixture used twice, and why its unused-fixture warning
# does not apply.
_USED = "the GOST suite's rounds"


def timing_off(benchmark) -> bool:
    """Whether pytest-benchmark is disabled (``--benchmark-disable``): nothing is timed."""
    return bool(benchmark.disabled)


def clock(benchmark) -> Clock:
    """The clock of the test's rounds: pytest-benchmark's timer and collector setting, and
    a profile for ``--benchmark-cprofile``."""
    benchmark._mode = _USED  # from here the test times its rounds, or fails in them
    profile = cProfile.Profile() if benchmark.cprofile else None
    return Clock(benchmark._timer, bool(benchmark._disable_gc), profile)


def record(benchmark, seconds: Sequence[float], used: Clock, extra_info: dict) -> None:
    """The test's timed rounds (every round's ``seconds``, a resumed test's first) as the
    fixture's statistics, with ``extra_info`` beside them; ``used``, the clock they were
    timed with (``clock``'s, which marked the fixture used; its profile, if any, saved
    with them)."""
    stats = benchmark._make_stats(1)
    for duration in seconds:
        stats.update(duration)
    if used.profile is not None:
        benchmark._save_cprofile(used.profile)
    benchmark.extra_info.update(extra_info)


def not_timed(benchmark, why: str) -> None:
    """A test that times nothing here (kept from ``--gost-resume``): the fixture is marked
    used, so pytest-benchmark does not warn of it (the summary says why)."""
    benchmark._mode = why
