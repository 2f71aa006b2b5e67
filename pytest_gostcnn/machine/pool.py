"""The worker threads of the suite's own float64 work (the reference, its error model, the
checks' replays): one per core of the cell, capped as a backend's are by the environment.

A NumPy call runs on the calling thread and releases the GIL in its loop, so a product split
into parts runs them on all the cores; each part's BLAS runs one thread (the callers hold
``one_blas_thread``). The pool's threads sleep while they wait: they hold up on a shared
cell, where BLAS's spinning threads collapse (docs/benchmarking.md, "A shared cell").
"""

from __future__ import annotations

import contextvars
import math
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import numpy as np
from array_api_compat import array_namespace, is_numpy_namespace

from .threads import cell_cores, one_blas_thread, thread_limit

# A product is split into parts of at least this many multiply-adds: a smaller part costs
# more to hand to the pool than it saves, and BLAS may sum a small product in another order
# (OpenBLAS's small-matrix kernels), where every part of a large one sums as the whole does.
PARALLEL_MIN_MACS = 1 << 22

# An elementwise chain over arrays this large runs a block at a time on the pool's threads:
# a block's temporaries (256 KiB of float64 each) stay in a core's cache, where each step
# over the whole arrays (a large layer's weights) would stream them through memory once
# more, on one core.
BLOCK_ELEMENTS = 1 << 15

_PREFIX = "gost-reference"
_lock = threading.Lock()
_pools: dict[int, ThreadPoolExecutor] = {}


@contextmanager
def reference_work() -> Iterator[None]:
    """What the suite's own float64 work (verification, checks) runs under, as before
    outside: BLAS on one thread (``one_blas_thread``), and NumPy's large arrays allocated
    without its transparent-huge-page advice, whose first touch of a fresh array can wait for
    the kernel to compact memory (docs/performance.md, "The suite's own work"). The backend's
    timed rounds run outside, under NumPy's own setting."""
    core = getattr(np, "_core", None) or getattr(np, "core", None)  # NumPy 2, NumPy 1
    set_advice = getattr(getattr(core, "multiarray", None), "_set_madvise_hugepage", None)
    with one_blas_thread():
        before = set_advice(False) if set_advice is not None else None
        try:
            yield
        finally:
            if set_advice is not None:
                set_advice(before)


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


def steps(span: slice, step: int) -> Iterator[slice]:
    """``span`` cut into slices of ``step`` (the last shorter)."""
    for start in range(span.start, span.stop, step):
        yield slice(start, min(start + step, span.stop))


def split(pieces: list[slice], part: Callable[[slice], None]) -> None:
    """Call ``part`` on each of ``pieces`` (``parts``), each on a thread of the pool, the
    first on the calling one. Each part writes its own slice of the result, so the result
    is the same however it is split. Called from a part (a split inside a split), the
    parts run one after another on the calling thread: a pool thread never waits on parts
    queued behind itself."""
    if threading.current_thread().name.startswith(_PREFIX):
        for piece in pieces:
            part(piece)
        return
    # Each part in a copy of the caller's context: NumPy's errstate (a caller's
    # ``np.errstate``) lives there, and a pool thread's own would not have it.
    futures = [
        _pool(len(pieces) - 1).submit(contextvars.copy_context().run, part, piece)
        for piece in pieces[1:]
    ]
    part(pieces[0])
    for future in futures:
        future.result()


def elementwise(chain: Callable[..., Any], *arrays: Any) -> Any:
    """``chain(*arrays)``, the arrays of one shape and ``chain`` elementwise (each output
    element reads the arrays' elements at its own position only), returning an array or a
    tuple of arrays of that shape. On NumPy, arrays of more than a block run a block of each
    at a time on the pool's threads: the values are the whole arrays' chain's. Arguments of
    other shapes (a scalar, an array ``chain`` broadcasts) run ``chain`` on the whole."""
    shape = getattr(arrays[0], "shape", ())
    size = math.prod(shape)
    if (
        size <= BLOCK_ELEMENTS
        or any(getattr(a, "shape", None) != shape for a in arrays)  # a scalar, a broadcast
        or not is_numpy_namespace(xp := array_namespace(*arrays))
    ):
        return chain(*arrays)
    flat = [xp.reshape(a, (-1,)) for a in arrays]
    first = chain(*(a[:BLOCK_ELEMENTS] for a in flat))
    single = not isinstance(first, tuple)
    first = (first,) if single else first
    outs = [xp.empty(size, dtype=f.dtype) for f in first]
    for out, f in zip(outs, first, strict=True):
        out[:BLOCK_ELEMENTS] = f
    blocks = -(-size // BLOCK_ELEMENTS)

    def part(span: slice) -> None:
        for block in range(span.start, span.stop):
            cut = slice(block * BLOCK_ELEMENTS, min((block + 1) * BLOCK_ELEMENTS, size))
            got = chain(*(a[cut] for a in flat))
            for out, g in zip(outs, (got,) if single else got, strict=True):
                out[cut] = g

    split(spans(blocks - 1, threads()), lambda span: part(slice(span.start + 1, span.stop + 1)))
    shaped = [xp.reshape(out, shape) for out in outs]
    return shaped[0] if single else tuple(shaped)


def _pool(workers: int) -> ThreadPoolExecutor:
    with _lock:
        if workers not in _pools:
            _pools[workers] = ThreadPoolExecutor(workers, thread_name_prefix=_PREFIX)
        return _pools[workers]
