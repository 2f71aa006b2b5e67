"""The cell's cores and what decides how many threads run on them: the environment, BLAS.

BLAS threads that wait by spinning collapse when other processes share the cores, so a
backend that parallelises itself runs BLAS on one thread (docs/performance.md, "Why the
NumPy kernels are shaped so").
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from threadpoolctl import ThreadpoolController

# The environment variables that change a run's speed or placement: thread counts, thread
# and process placement, which devices a process sees. A report states each that is set.
SPEED_VARIABLES = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "GOTO_NUM_THREADS",
    "OMP_PROC_BIND",
    "OMP_PLACES",
    "OMP_DYNAMIC",
    "OMP_WAIT_POLICY",
    "GOMP_CPU_AFFINITY",
    "KMP_AFFINITY",
    "MKL_DYNAMIC",
    "MKL_THREADING_LAYER",
    "OPENBLAS_CORETYPE",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "CUDA_LAUNCH_BLOCKING",
    "NVIDIA_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "CUPY_ACCELERATORS",
    "CUPY_TF32",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "SLURM_CPU_BIND",
    "SLURM_CPUS_PER_TASK",
)
# Of those, the ones a resumed run must share with its report (``run/resume.py``): the
# thread counts and placement, not which device a job of several cells is given.
THREAD_VARIABLES = SPEED_VARIABLES[: SPEED_VARIABLES.index("OPENBLAS_CORETYPE") + 1]
# What a report keeps of each BLAS library threadpoolctl finds (its path is the machine's).
BLAS_FIELDS = ("user_api", "internal_api", "version", "threading_layer", "architecture")


def cell_cores() -> int:
    """The cores this process may run on: the computing cell (section 9.3), its affinity set."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def environment(variables: tuple[str, ...] = SPEED_VARIABLES) -> dict[str, str]:
    """Each of ``variables`` that is set, with its value."""
    return {name: os.environ[name] for name in variables if name in os.environ}


def thread_limit() -> int | None:
    """The smallest positive thread count the environment sets for BLAS or OpenMP, if any."""
    limits = [
        int(value)
        for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
        if (value := os.environ.get(name, "")).isdigit() and int(value) > 0
    ]
    return min(limits) if limits else None


def blas() -> list[dict]:
    """Each BLAS library loaded in this process: its build and the threads it runs now,
    sorted (the order threadpoolctl finds them in can change between runs: two reports
    of one configuration list them alike)."""
    libraries = [
        {**{key: info.get(key) for key in BLAS_FIELDS}, "threads": info.get("num_threads")}
        for info in ThreadpoolController().info()
        if info.get("user_api") == "blas"
    ]
    return sorted(libraries, key=lambda library: [str(library[key]) for key in BLAS_FIELDS])


def limit_blas(threads: int) -> None:
    """Every loaded BLAS library runs at most ``threads`` threads, for the whole process.

    The libraries are found anew at each call (about 1 ms): one loaded since an earlier call
    (SciPy's OpenBLAS, which importing Numba loads) is limited too."""
    for library in ThreadpoolController().lib_controllers:
        if library.user_api == "blas" and library.num_threads > threads:
            library.set_num_threads(threads)


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """BLAS on one thread inside, as before outside: the float64 reference (verification,
    checks) never collapses on a shared cell (docs/benchmarking.md, "A shared cell")."""
    with _controller().limit(limits=1, user_api="blas"):
        yield


_found: tuple[int, ThreadpoolController] | None = None


def _controller() -> ThreadpoolController:
    """The libraries loaded now, found anew (about 1 ms) only where a module was imported
    since the last search: a BLAS is loaded by an import (SciPy's, torch's), and a run
    limits BLAS around each of its hundreds of layer items."""
    global _found
    if _found is None or _found[0] != len(sys.modules):
        _found = (len(sys.modules), ThreadpoolController())
    return _found[1]
