"""Scratch memory and worker threads of the NumPy backend (docs/performance.md).

BLAS threads every GEMM itself, but a NumPy ufunc runs on the calling thread (releasing
the GIL in its loop), so the element-wise passes split their work over a pool. Scratch
buffers are kept between calls; a result array is handed out again only once nobody holds
a reference to it (``Workspace.result``).
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..common import images_per_chunk

# One GEMM's im2col buffer holds at most this many bytes; the batch is processed in chunks
# of whole images that fit (one image at a time if one image alone is larger).
WORKSPACE_BYTES = 16 * 2**20

# Below this many array elements a pass runs on the calling thread: handing work to the
# pool costs tens of microseconds.
PARALLEL_MIN_ELEMENTS = 1 << 15

# Results smaller than this come from NumPy directly (malloc's heap serves them cheaply);
# the recycled ones together hold at most RESULTS_FRACTION of the machine's memory.
RESULT_MIN_BYTES = 1 << 20
RESULTS_FRACTION = 0.25

_THREAD_LIMITS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def cell_cores() -> int:
    """The cores this process may run on: the computing cell (section 9.3).

    That is the CPU affinity set, which is also what OpenBLAS starts its threads on, so BLAS
    is left at its default.
    """
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def worker_threads() -> int:
    """Threads for the element-wise passes: the cell's cores, capped as BLAS is capped.

    A user limit in ``OMP_NUM_THREADS`` / ``OPENBLAS_NUM_THREADS`` caps them as it caps
    OpenBLAS (the project's own tests run single-threaded that way).
    """
    threads = cell_cores()
    for variable in _THREAD_LIMITS:
        value = os.environ.get(variable, "")
        if value.isdigit() and int(value) > 0:
            threads = min(threads, int(value))
    return max(threads, 1)


def _memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):
        return 8 << 30


class Workspace:
    """Reusable scratch buffers and the thread pool of one backend instance."""

    def __init__(
        self,
        threads: int,
        workspace_bytes: int = WORKSPACE_BYTES,
        parallel_min: int = PARALLEL_MIN_ELEMENTS,
    ) -> None:
        self.threads = threads
        self.workspace_bytes = workspace_bytes
        self.parallel_min = parallel_min
        self._buffers: dict[tuple[str, np.dtype], np.ndarray] = {}
        self._results: dict[tuple[tuple[int, ...], np.dtype], list[np.ndarray]] = {}
        self._results_bytes = 0
        self._pool: ThreadPoolExecutor | None = None

    def result(self, shape: Sequence[int], dtype: np.dtype) -> np.ndarray:
        """An uninitialised array for a kernel to return: fresh, or one nobody holds any more."""
        dtype = np.dtype(dtype)
        shape = tuple(shape)
        nbytes = math.prod(shape) * dtype.itemsize
        if nbytes < RESULT_MIN_BYTES:
            return np.empty(shape, dtype=dtype)
        arrays = self._results.setdefault((shape, dtype), [])
        for i in range(len(arrays)):
            # Two references: the list's and getrefcount's argument. A view of the array
            # (what a kernel returns is often one) holds a third through its base.
            if sys.getrefcount(arrays[i]) == 2:
                return arrays[i]
        if self._results_bytes + nbytes > _memory_bytes() * RESULTS_FRACTION:
            self._forget_free_results()
        array = np.empty(shape, dtype=dtype)
        arrays.append(array)
        self._results_bytes += nbytes
        return array

    def _forget_free_results(self) -> None:
        for key, arrays in self._results.items():
            kept = [a for a in arrays if sys.getrefcount(a) > 3]  # the list's, a's, the call's
            self._results_bytes -= sum(a.nbytes for a in arrays) - sum(a.nbytes for a in kept)
            self._results[key] = kept

    def scratch(self, name: str, shape: Sequence[int], dtype: np.dtype) -> np.ndarray:
        """An uninitialised array of ``shape``; the same memory on every call with ``name``.

        Valid until the next request for ``name``: callers in different threads use
        different names.
        """
        size = math.prod(shape)
        key = (name, np.dtype(dtype))
        buffer = self._buffers.get(key)
        if buffer is None or buffer.size < size:
            buffer = np.empty(size, dtype=dtype)
            self._buffers[key] = buffer
        return buffer[:size].reshape(shape)

    def ones(self, count: int, dtype: np.dtype) -> np.ndarray:
        """``count`` ones (read-only by convention): sums over a batch as a GEMV."""
        key = ("ones", np.dtype(dtype))
        buffer = self._buffers.get(key)
        if buffer is None or buffer.size < count:
            buffer = np.ones(count, dtype=dtype)
            self._buffers[key] = buffer
        return buffer[:count]

    def images_per_chunk(self, bytes_per_image: int, batch: int) -> int:
        """Whole images whose workspace fits ``workspace_bytes`` (at least one)."""
        return images_per_chunk(batch, bytes_per_image, self.workspace_bytes)

    def parallel(self, task: Callable[[int, int, int], None], count: int, elements: int) -> None:
        """Run ``task(part, start, stop)`` over ``range(count)`` cut into contiguous parts.

        ``elements`` is the size of the whole pass; a small pass runs as one part on the
        calling thread. ``part`` numbers the parts from 0, for per-thread scratch names.
        Exceptions propagate to the caller.
        """
        parts = min(self.threads, count) if elements >= self.parallel_min else 1
        if parts <= 1:
            task(0, 0, count)
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.threads - 1, thread_name_prefix="gostcnn-numpy")
        bounds = [count * i // parts for i in range(parts + 1)]
        futures = [
            self._pool.submit(task, part, bounds[part], bounds[part + 1])
            for part in range(1, parts)
        ]
        try:
            task(0, bounds[0], bounds[1])
        finally:
            for future in futures:
                future.result()
