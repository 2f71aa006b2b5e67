"""The update step (section 3.35): ``W += W_D / B`` in place, in cache-sized blocks split
over the threads.

The quotient ``W_D / B`` of each block lives in per-thread scratch: ``w += grad / batch``
would allocate a temporary as large as the weights (411 MB for the canonical VGG-16's
first fully connected layer), fault in its pages and run on one thread. The arithmetic is
the same, so the result is bit for bit ``reference/update.py``'s.
"""

from __future__ import annotations

import numpy as np

from pytest_gostcnn.model.layers import Layer

from ...common import update as plain_update
from ..workspace import Workspace
from ._shared import _flat_pass

# Below this many weights the update runs on the calling thread: a divide and an add per
# weight are too little work to pay the pool's hand-off
# (docs/performance.md, "Why the NumPy kernels are shaped so").
PARALLEL_MIN_WEIGHTS = 1 << 20


def update(ws: Workspace, layer: Layer, weights: dict, grads: dict, batch: int) -> None:
    for name, grad in grads.items():
        w = weights[name]
        if not (w.flags.c_contiguous and grad.flags.c_contiguous and w.shape == grad.shape):
            # a gradient that is a view (a transposed product): the plain update
            plain_update({name: w}, {name: grad}, batch)
            continue
        flat_w, flat_grad = w.reshape(-1), grad.reshape(-1)

        def step(part: int, s: slice, flat_w=flat_w, flat_grad=flat_grad) -> None:
            quotient = ws.scratch(f"quotient{part}", (s.stop - s.start,), flat_w.dtype)
            np.divide(flat_grad[s], batch, out=quotient)
            np.add(flat_w[s], quotient, out=flat_w[s])

        _flat_pass(ws, flat_w.size, step, PARALLEL_MIN_WEIGHTS)
