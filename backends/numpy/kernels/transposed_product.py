"""A weight gradient's ``a.T @ b`` of two tall matrices (FILTERS_D, section 6.1): in the
orientation OpenBLAS runs faster, a small product split along its reduction."""

from __future__ import annotations

import numpy as np

from ..workspace import Workspace

# A 1x1 layer's weight gradient product up to this many elements (32 channels into 512
# features) is split over the threads along its reduction, into per-thread partial products
# summed at the end: split along its own short sides, each thread would stream all of the
# tall operands for a sliver of the product. (A wider window's gradient of such a size goes
# block by block, one sum per thread: _blocked_gradient.)
SPLIT_REDUCTION_ELEMENTS = 1 << 14


def _transposed_product(
    ws: Workspace, a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None
) -> np.ndarray:
    """``a.T @ b`` for the tall [N][K] and [N][F] of a weight gradient.

    OpenBLAS runs this reduction over N slower when the product has fewer rows than
    columns (K < F: a widening 1x1 convolution), so such a product is computed as
    ``(b.T @ a).T`` (docs/performance.md, "Why the NumPy kernels are shaped so"). A small
    product is split over the threads along N (SPLIT_REDUCTION_ELEMENTS), the partial
    products summed in the threads' order, so the result does not depend on which thread
    ran first.
    """
    if out is None:
        out = np.empty((a.shape[1], b.shape[1]), dtype=np.result_type(a, b))
    macs = a.shape[0] * a.shape[1] * b.shape[1]
    parts = min(ws.threads, a.shape[0])
    if out.size > SPLIT_REDUCTION_ELEMENTS or parts < 2 or macs < ws.parallel_min_macs:
        _oriented_product(ws, a, b, out)
        return out
    partials = [out] + [ws.scratch(f"partial{p}", out.shape, out.dtype) for p in range(1, parts)]
    bounds = [a.shape[0] * p // parts for p in range(parts + 1)]

    def task(part: int, start: int, stop: int) -> None:
        for p in range(start, stop):
            rows = slice(bounds[p], bounds[p + 1])
            _oriented_product(None, a[rows], b[rows], partials[p])

    ws.parallel(task, parts, macs, 0)
    for partial in partials[1:]:
        np.add(out, partial, out=out)
    return out


def _oriented_product(ws: Workspace | None, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """``out`` = ``a.T @ b`` in the orientation OpenBLAS runs faster; split over the
    threads of ``ws`` (None: on the calling thread)."""

    def multiply(x: np.ndarray, y: np.ndarray, into: np.ndarray) -> None:
        if ws is None:
            np.matmul(x, y, out=into)
        else:
            ws.matmul(x, y, into)

    if a.shape[1] >= b.shape[1]:
        multiply(a.T, b, out)
    else:  # out.T is a view: (b.T @ a) written into it is out = a.T @ b
        multiply(b.T, a, out.T)
