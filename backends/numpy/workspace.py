"""Scratch memory and worker threads of the NumPy backend (docs/performance.md).

A NumPy call runs on the calling thread (releasing the GIL in its loop), so every pass,
GEMMs included, splits its work over one pool sized to the cell; BLAS runs one thread
(``NumpyBackend``): its spinning threads collapse on a shared cell, the pool's sleep. Scratch
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

from pytest_gostcnn.machine.threads import cell_cores, thread_limit

from ..common import images_per_chunk

# One GEMM's im2col buffer holds at most this many bytes; the batch is processed in chunks
# of whole images that fit (one image at a time if one image alone is larger).
WORKSPACE_BYTES = 16 * 2**20
# A convolution whose weight matrix is at most BLOCKED_WEIGHTS_BYTES copies and multiplies
# its im2col a block of about BLOCK_BYTES at a time on each thread: the GEMM reads the block
# from the cache the copy left it in. Larger weights, which every block would read again,
# take the chunks above and a GEMM split over the threads (docs/performance.md).
BLOCK_BYTES = 2**20
BLOCKED_WEIGHTS_BYTES = 2**20

# Below this many array elements a pass runs on the calling thread: the pool's hand-off
# costs more (docs/performance.md, "Why the NumPy kernels are shaped so").
PARALLEL_MIN_ELEMENTS = 1 << 18
# Below this many multiply-adds a GEMM runs on the calling thread: the pool's hand-off
# costs more (docs/performance.md, "Why the NumPy kernels are shaped so").
PARALLEL_MIN_MACS = 1 << 22

# Results smaller than this come from NumPy directly (malloc's heap serves them cheaply);
# the recycled ones together hold at most RESULTS_FRACTION of the machine's memory.
RESULT_MIN_BYTES = 1 << 20
RESULTS_FRACTION = 0.25


def worker_threads() -> int:
    """Threads of the pool: the cell's cores, capped by a user's ``OMP_NUM_THREADS`` /
    ``OPENBLAS_NUM_THREADS`` / ``MKL_NUM_THREADS`` (the project's own tests run on one)."""
    limit = thread_limit()
    return max(1, min(cell_cores(), limit) if limit else cell_cores())


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
        parallel_min_macs: int = PARALLEL_MIN_MACS,
        block_bytes: int = BLOCK_BYTES,
        blocked_weights_bytes: int = BLOCKED_WEIGHTS_BYTES,
    ) -> None:
        self.threads = threads
        self.workspace_bytes = workspace_bytes
        self.block_bytes = block_bytes
        self.blocked_weights_bytes = blocked_weights_bytes
        self.parallel_min = parallel_min
        self.parallel_min_macs = parallel_min_macs
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
            self.forget_free_results()
        array = np.empty(shape, dtype=dtype)
        arrays.append(array)
        self._results_bytes += nbytes
        return array

    def forget_free_results(self) -> None:
        """Let go of every kept result array nobody holds (``result`` allocates again)."""
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

    def matmul(self, a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """``a @ b`` of two matrices, the product's longer side split over the threads."""
        if out is None:
            out = np.empty((a.shape[0], b.shape[1]), dtype=np.result_type(a, b))
        by_rows = a.shape[0] >= b.shape[1]

        def task(part: int, start: int, stop: int) -> None:
            if by_rows:
                np.matmul(a[start:stop], b, out=out[start:stop])
            else:
                np.matmul(a, b[:, start:stop], out=out[:, start:stop])

        macs = a.shape[0] * a.shape[1] * b.shape[1]
        count = out.shape[0] if by_rows else out.shape[1]
        self.parallel(task, count, macs, self.parallel_min_macs)
        return out

    def parallel(
        self,
        task: Callable[[int, int, int], None],
        count: int,
        elements: int,
        minimum: int | None = None,
    ) -> None:
        """Run ``task(part, start, stop)`` over ``range(count)`` cut into contiguous parts.

        ``elements`` is the size of the whole pass; a pass below ``minimum`` (by default
        ``parallel_min``) runs as one part on the calling thread. ``part`` numbers the parts
        from 0, for per-thread scratch names.
        Exceptions propagate to the caller.
        """
        small = elements < (self.parallel_min if minimum is None else minimum)
        parts = 1 if small else min(self.threads, count)
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
