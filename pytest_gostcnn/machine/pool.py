"""The worker threads of the suite's own float64 work (the reference, its error model, the
audits' replays): one per core of the cell, capped as a backend's are by the environment.

A NumPy call runs on the calling thread and releases the GIL in its loop, so a product split
into parts runs them on all the cores; each part's BLAS runs one thread (the callers hold
``one_blas_thread``). The pool's threads sleep while they wait: they hold up on a shared
cell, where BLAS's spinning threads collapse (docs/benchmarking.md, "A shared cell").
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from .threads import cell_cores, thread_limit

# A product is split into parts of at least this many multiply-adds: a smaller part costs
# more to hand to the pool than it saves, and BLAS may sum a small product in another order
# (OpenBLAS's small-matrix kernels), where every part of a large one sums as the whole does.
PARALLEL_MIN_MACS = 1 << 22

_lock = threading.Lock()
_pools: dict[int, ThreadPoolExecutor] = {}


def threads() -> int:
    """The pool's threads, the calling one included: the cell's cores, capped by a user's
    ``OMP_NUM_THREADS`` / ``OPENBLAS_NUM_THREADS`` / ``MKL_NUM_THREADS``."""
    limit = thread_limit()
    return max(1, min(cell_cores(), limit) if limit else cell_cores())


def spans(length: int, parts: int) -> list[slice]:
    """``range(length)`` cut into at most ``parts`` contiguous slices of nearly equal size."""
    parts = max(1, min(parts, length))
    bounds = [length * i // parts for i in range(parts + 1)]
    return [slice(start, stop) for start, stop in zip(bounds, bounds[1:], strict=False)]


def parts(length: int, macs: int) -> list[slice]:
    """``range(length)`` cut into one slice a thread of the pool, each at least
    ``PARALLEL_MIN_MACS`` of the work (``macs`` multiply-adds in all): one slice, the whole,
    for a small product."""
    return spans(length, min(threads(), macs // PARALLEL_MIN_MACS))


def split(pieces: list[slice], part: Callable[[slice], None]) -> None:
    """Call ``part`` on each of ``pieces`` (``parts``), each on a thread of the pool, the
    first on the calling one. Each part writes its own slice of the result, so the result
    is the same however it is split."""
    futures = [_pool(len(pieces) - 1).submit(part, piece) for piece in pieces[1:]]
    part(pieces[0])
    for future in futures:
        future.result()


def _pool(workers: int) -> ThreadPoolExecutor:
    with _lock:
        if workers not in _pools:
            _pools[workers] = ThreadPoolExecutor(workers, thread_name_prefix="gost-reference")
        return _pools[workers]
