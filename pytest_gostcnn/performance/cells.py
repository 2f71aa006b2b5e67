"""Computing cells (section 9.3): one MPI rank per cell, or a single cell without MPI.

Under ``mpirun -n N pytest ...`` every rank runs the same session as one cell; the ranks
meet only at the collective calls below, in the same order (docs/cells.md).
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# Variables the common launchers set in every rank's environment: Open MPI, MPICH/Hydra
# and Intel MPI (PMI), PMIx (Slurm, Open MPI 5).
_SIZE_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE")


# The watched barrier's messages: each cell's arrival, sent to cell 0, and cell 0's word to
# go on. Point-to-point messages never match a collective's, so these tags are the
# barrier's own.
_ARRIVED, _GO = 57700, 57701
# A waiting cell tests for its messages ever less often (a hundredth of its wait so far), up
# to this many seconds between tests: a long wait costs no core, and the cells still leave
# the barrier together (docs/cells.md).
_MOST_BETWEEN_TESTS = 0.01


class CellsError(RuntimeError):
    """An MPI run that cannot be set up (e.g. mpi4py missing under mpirun), or a barrier
    that a cell did not reach in time."""


@dataclass(frozen=True)
class Deadline:
    """How long a cell waits for the others at a watched barrier, and why that long."""

    seconds: float
    source: str  # e.g. "--gost-stall-timeout"

    def __str__(self) -> str:
        return f"{self.seconds:g} s ({self.source})"


@dataclass
class Cells:
    """This process's place among the cells, and the collectives between them."""

    rank: int = 0
    size: int = 1
    local_rank: int = 0
    host: str = field(default_factory=socket.gethostname)
    comm: Any = None  # an mpi4py communicator when size > 1

    @property
    def is_root(self) -> bool:
        return self.rank == 0

    def watched_barrier(
        self,
        deadline: Deadline,
        where: str,
        on_stall: Callable[[str], None],
        word: Callable[[], Any] | None = None,
    ) -> Any:
        """A barrier that gives up on a cell that does not reach it within ``deadline``:
        ``on_stall`` gets one line naming the stalled cells and ``where`` they were (the
        session's ends the job), then CellsError. Returns cell 0's ``word()`` (None
        without one) on every cell, called once every cell has arrived. Without MPI there
        is nothing to wait for.

        Every cell tells cell 0 it arrived; cell 0 waits for them all, so it knows which
        are missing, then tells each to go on, with its word. The others wait twice the
        deadline for that word: a cell that arrived early waits longer than cell 0 (which
        names the stalled cell first), yet not forever when cell 0 itself is stalled
        (docs/cells.md).
        """
        if self.comm is None:
            return None if word is None else word()
        if self.is_root:
            arrivals = {
                cell: self.comm.irecv(source=cell, tag=_ARRIVED) for cell in range(1, self.size)
            }
            missing = _wait(arrivals, deadline.seconds)
            if missing:
                names = ", ".join(map(str, missing))
                message = (
                    f"cell{'s' if len(missing) > 1 else ''} {names} of {self.size} stalled in "
                    f"{where}: not at the barrier after it within {deadline}"
                )
                on_stall(message)
                raise CellsError(message)
            said = None if word is None else word()
            for request in [self.comm.isend(said, dest=cell, tag=_GO) for cell in arrivals]:
                request.wait()
            return said
        arrived = self.comm.isend(None, dest=0, tag=_ARRIVED)
        said: dict[int, Any] = {}
        if _wait({0: self.comm.irecv(source=0, tag=_GO)}, 2 * deadline.seconds, said):
            message = (
                f"cell 0 of {self.size} stalled in {where}: cell {self.rank} waited for it at "
                f"the barrier after it for twice the deadline of {deadline}"
            )
            on_stall(message)
            raise CellsError(message)
        arrived.wait()
        return said[0]

    def abort(self, status: int) -> None:
        """End every cell's process, a hung one too, with ``status`` (MPI's Abort)."""
        self.comm.Abort(status)

    def allgather(self, value: Any) -> list:
        """Every cell's ``value``, in rank order, on every cell."""
        return [value] if self.comm is None else self.comm.allgather(value)

    def gather(self, value: Any) -> list | None:
        """Every cell's ``value`` in rank order on cell 0; None on the others."""
        return [value] if self.comm is None else self.comm.gather(value, root=0)


def _wait(requests: dict[int, Any], seconds: float, received: dict | None = None) -> list[int]:
    """Test ``requests`` (by cell) until all are complete or ``seconds`` have passed; the
    cells whose requests are still incomplete. Each message received goes in ``received``,
    by cell (a request, once tested complete, gives its message no more)."""
    started = time.monotonic()
    pending = dict(requests)
    while True:
        for cell, request in list(pending.items()):
            done, message = request.test()
            if done:
                del pending[cell]
                if received is not None:
                    received[cell] = message
        waited = time.monotonic() - started
        if not pending or waited >= seconds:
            return sorted(pending)
        time.sleep(min(_MOST_BETWEEN_TESTS, waited / 100))


def launched_size(environ: dict[str, str] | None = None) -> int:
    """How many ranks the MPI launcher started, from its environment (1 without one)."""
    environ = os.environ if environ is None else environ
    for name in _SIZE_VARIABLES:
        if environ.get(name, "").isdigit():
            return int(environ[name])
    return 1


def detect() -> Cells:
    """The cells of this run: MPI's ranks under a launcher with several ranks, else one."""
    if launched_size() <= 1:
        return Cells()
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise CellsError(
            f"this pytest runs as one of {launched_size()} MPI ranks, but mpi4py cannot be "
            f"imported ({exc}); install it with: pip install 'pytest-gostcnn[mpi]'"
        ) from None
    world = MPI.COMM_WORLD
    node = world.Split_type(MPI.COMM_TYPE_SHARED)
    return Cells(rank=world.rank, size=world.size, local_rank=node.rank, comm=world)
