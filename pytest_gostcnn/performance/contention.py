"""Whether other work shared the computing cell during a test's timed rounds.

Linux counts, for each thread, the time it was ready to run but waited for a core
(``/proc/self/task/*/schedstat``, in nanoseconds). The most any one of the test's threads
waited, over the rounds' wall time, is the delay other processes (or, in a virtual machine,
the host) added to the timed work. Counted over the timed rounds only, from the end of each
round's setup to the start of its teardown (docs/benchmarking.md, "A shared cell").
"""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass

from pytest_gostcnn.machine.threads import cell_cores

# A thread of the test waited for a core more than this share of the rounds' wall time: the
# cell was shared, and the time is not the cell's own (docs/benchmarking.md, "A shared cell").
SHARED_LIMIT = 0.10


@dataclass(frozen=True)
class Contention:
    """What the cell's cores did for one cell's timed rounds of one test."""

    wall_seconds: float  # the timed rounds, end to end of each, summed
    cpu_seconds: float  # this process's CPU time in them, every thread's
    cores: int  # the cell's cores (the process's affinity set)
    wait_seconds: float | None  # its threads' time ready to run but without a core, summed;
    # None: not measured on this system
    load_average: float | None  # the system's 1-minute load average after the last round
    delay_seconds: float | None = None  # the most one thread waited; None: not measured, or
    # a report that predates it

    @property
    def cpu_share(self) -> float | None:
        """This process's CPU time over (wall time x the cell's cores)."""
        if self.wall_seconds <= 0:
            return None
        return self.cpu_seconds / (self.wall_seconds * self.cores)

    @property
    def wait_share(self) -> float | None:
        """The threads' waiting for a core over their time ready to run (running or waiting)."""
        if self.wait_seconds is None or self.cpu_seconds + self.wait_seconds <= 0:
            return None
        return self.wait_seconds / (self.cpu_seconds + self.wait_seconds)

    @property
    def delay_share(self) -> float | None:
        """The most one thread waited for a core over the rounds' wall time."""
        if self.wait_seconds is None or self.delay_seconds is None or self.wall_seconds <= 0:
            return None
        return self.delay_seconds / self.wall_seconds

    @property
    def judged_share(self) -> float | None:
        """The share ``shared`` judges: ``delay_share``; in a report that predates it, the
        ``wait_share`` that report was judged by."""
        return self.wait_share if self.delay_seconds is None else self.delay_share

    @property
    def shared(self) -> bool:
        """The judged share is above ``SHARED_LIMIT``."""
        share = self.judged_share
        return share is not None and share > SHARED_LIMIT

    def waited(self) -> str:
        """``a thread waited for a core 48 % of the rounds' time`` (in a report that predates
        the delay, ``waited for a core 48 % of its ready time``)."""
        if self.judged_share is None:
            return "waiting for a core not measured on this system"
        of = "of its ready time" if self.delay_seconds is None else "of the rounds' time"
        who = "waited" if self.delay_seconds is None else "a thread waited"
        return f"{who} for a core {100 * self.judged_share:.0f} % {of}"

    def describe(self) -> str:
        """``a thread waited for a core 48 % of the rounds' time (CPU 51 % of 2 cores; load
        average 3.9)``."""
        cores = f"{self.cores} core{'s' * (self.cores != 1)}"
        cpu = "" if self.cpu_share is None else f"CPU {100 * self.cpu_share:.0f} % of {cores}"
        load = "" if self.load_average is None else f"load average {self.load_average:.2g}"
        extra = "; ".join(part for part in (cpu, load) if part)
        return f"{self.waited()} ({extra})" if extra else self.waited()

    def as_dict(self) -> dict:
        return {
            "wall_seconds": self.wall_seconds,
            "cpu_seconds": self.cpu_seconds,
            "cores": self.cores,
            "wait_seconds": self.wait_seconds,
            "delay_seconds": self.delay_seconds,
            "load_average": self.load_average,
            "cpu_share": self.cpu_share,
            "wait_share": self.wait_share,
            "delay_share": self.delay_share,
            "shared": self.shared,
        }

    @classmethod
    def from_dict(cls, data: dict) -> Contention:
        """What ``as_dict`` measured; the shares and ``shared`` are recomputed."""
        counts = {field.name: data[field.name] for field in dataclasses.fields(cls)[:5]}
        return cls(**counts, delay_seconds=data.get("delay_seconds"))


def waited_seconds(tasks: str = "/proc/self/task") -> dict[int, float] | None:
    """Each thread's time ready to run without a core so far, by thread id (None where the
    system does not count it)."""
    try:
        names = os.listdir(tasks)
    except OSError:
        return None
    waits = {}
    for name in names:
        try:
            with open(f"{tasks}/{name}/schedstat", encoding="ascii") as stat:
                waits[int(name)] = int(stat.read().split()[1]) / 1e9
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended meanwhile
    return waits or None


class ContentionMeter:
    """Adds up wall time, own CPU time and each thread's waiting between ``start`` and
    ``stop`` calls (``tasks``: where the threads' counters are).

    ``earlier``: a test resumed from a checkpoint inside it goes on from what its stopped
    run counted up to there, so the counts cover the same timed rounds as the test's times;
    ``counted=False``: that checkpoint counted nothing (a report before the measure), and
    the test's counts are unknown (``contention`` is None) rather than a part's."""

    def __init__(
        self,
        tasks: str = "/proc/self/task",
        earlier: Contention | None = None,
        counted: bool = True,
    ) -> None:
        self.tasks = tasks
        self.cores = cell_cores()
        self.counted = counted
        self.measurable = waited_seconds(tasks) is not None
        self.wall = self.cpu = self.wait = self.delay_before = 0.0
        self.waits: dict[int, float] = {}  # each thread's waiting in the rounds, by thread id
        if earlier is not None:
            self.wall, self.cpu = earlier.wall_seconds, earlier.cpu_seconds
            if earlier.wait_seconds is None:
                self.measurable = False
            else:
                self.wait = earlier.wait_seconds
                delay = earlier.delay_seconds
                # A checkpoint that predates the delay: all its threads' waiting bounds it.
                self.delay_before = earlier.wait_seconds if delay is None else delay
        self._started: tuple[dict[int, float] | None, float, float] | None = None

    def start(self) -> None:
        waits = waited_seconds(self.tasks) if self.measurable else None
        self._started = (waits, time.process_time(), time.perf_counter())

    def stop(self) -> None:
        if self._started is None:
            return
        wall, cpu = time.perf_counter(), time.process_time()
        waits = waited_seconds(self.tasks) if self.measurable else None
        waits0, cpu0, wall0 = self._started
        self._started = None
        self.wall += wall - wall0
        self.cpu += cpu - cpu0
        if waits is None or waits0 is None:
            self.measurable = False
            return
        for thread in waits.keys() & waits0.keys():
            waited = waits[thread] - waits0[thread]
            self.wait += waited
            self.waits[thread] = self.waits.get(thread, 0.0) + waited

    def contention(self) -> Contention | None:
        """What the rounds measured so far (None: not all of them were counted)."""
        if not self.counted:
            return None
        try:
            load: float | None = os.getloadavg()[0]
        except (OSError, AttributeError):
            load = None
        if not self.measurable:
            return Contention(self.wall, self.cpu, self.cores, None, load)
        # A resumed test's threads are new ones: the stopped run's most adds to this run's.
        delay = self.delay_before + max(self.waits.values(), default=0.0)
        return Contention(self.wall, self.cpu, self.cores, self.wait, load, delay)
