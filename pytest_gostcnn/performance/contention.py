"""Whether other work shared the computing cell during a test's timed rounds.

Linux counts, for each thread, the time it ran and the time it was ready to run but waited
for a core (``/proc/self/task/*/schedstat``, in nanoseconds). Summed over the process's
threads, the waiting share is how much of the time the test wanted the cell's cores it did
not get: other processes (or, in a virtual machine, the host) held them. Counted over the
timed rounds only, from the end of each round's setup to the start of its teardown
(docs/benchmarking.md, "A shared cell").
"""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass

from pytest_gostcnn.machine.threads import cell_cores

# The test's threads waited for a core more than this share of the time they were ready to
# run: the cell was shared, and the time is not the cell's own. On cores of their own they
# wait only to be woken, far less (docs/benchmarking.md, "A shared cell", has the runs).
SHARED_LIMIT = 0.10


@dataclass(frozen=True)
class Contention:
    """What the cell's cores did for one cell's timed rounds of one test."""

    wall_seconds: float  # the timed rounds, end to end of each, summed
    cpu_seconds: float  # this process's CPU time in them, every thread's
    cores: int  # the cell's cores (the process's affinity set)
    wait_seconds: float | None  # its threads' time ready to run but without a core; None:
    # not measured on this system
    load_average: float | None  # the system's 1-minute load average after the last round

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
    def shared(self) -> bool:
        """The threads waited for a core more than ``SHARED_LIMIT`` of their ready time."""
        share = self.wait_share
        return share is not None and share > SHARED_LIMIT

    def describe(self) -> str:
        """``waited for a core 48 % of its ready time (CPU 51 % of 2 cores; load average 3.9)``."""
        cores = f"{self.cores} core{'s' * (self.cores != 1)}"
        cpu = "" if self.cpu_share is None else f"CPU {100 * self.cpu_share:.0f} % of {cores}"
        load = "" if self.load_average is None else f"load average {self.load_average:.2g}"
        extra = "; ".join(part for part in (cpu, load) if part)
        if self.wait_share is None:
            said = "waiting for a core not measured on this system"
        else:
            said = f"waited for a core {100 * self.wait_share:.0f} % of its ready time"
        return f"{said} ({extra})" if extra else said

    def as_dict(self) -> dict:
        return {
            "wall_seconds": self.wall_seconds,
            "cpu_seconds": self.cpu_seconds,
            "cores": self.cores,
            "wait_seconds": self.wait_seconds,
            "load_average": self.load_average,
            "cpu_share": self.cpu_share,
            "wait_share": self.wait_share,
            "shared": self.shared,
        }

    @classmethod
    def from_dict(cls, data: dict) -> Contention:
        """What ``as_dict`` measured; the shares and ``shared`` are recomputed."""
        return cls(**{field.name: data[field.name] for field in dataclasses.fields(cls)})


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
    """Adds up wall time, own CPU time and the threads' waiting between ``start`` and
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
        self.wall = self.cpu = self.wait = 0.0
        if earlier is not None:
            self.wall, self.cpu = earlier.wall_seconds, earlier.cpu_seconds
            if earlier.wait_seconds is None:
                self.measurable = False
            else:
                self.wait = earlier.wait_seconds
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
        self.wait += sum(waits[t] - waits0[t] for t in waits.keys() & waits0.keys())

    def contention(self) -> Contention | None:
        """What the rounds measured so far (None: not all of them were counted)."""
        if not self.counted:
            return None
        try:
            load: float | None = os.getloadavg()[0]
        except (OSError, AttributeError):
            load = None
        wait = self.wait if self.measurable else None
        return Contention(self.wall, self.cpu, self.cores, wait, load)
