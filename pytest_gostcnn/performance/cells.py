"""Computing cells (section 9.3): one MPI rank per cell, or a single cell without MPI.

Under ``mpirun -n N pytest ...`` every rank runs the same session as one cell; the ranks
meet only at the collective calls below, in the same order (docs/cells.md).
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from typing import Any

# Variables the common launchers set in every rank's environment: Open MPI, MPICH/Hydra
# and Intel MPI (PMI), PMIx (Slurm, Open MPI 5).
_SIZE_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE")


class CellsError(RuntimeError):
    """An MPI run that cannot be set up (e.g. mpi4py missing under mpirun)."""


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

    def barrier(self) -> None:
        if self.comm is not None:
            self.comm.Barrier()

    def allgather(self, value: Any) -> list:
        """Every cell's ``value``, in rank order, on every cell."""
        return [value] if self.comm is None else self.comm.allgather(value)

    def gather(self, value: Any) -> list | None:
        """Every cell's ``value`` in rank order on cell 0; None on the others."""
        return [value] if self.comm is None else self.comm.gather(value, root=0)


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
