"""The weights a timed training round starts from, rebuilt on the host for its audit.

A training test sets its weights back to the drawn values before each segment
(``performance/rounds.py``), so a round's weights follow from the drawn ones and the
images and residuals of the segment's earlier rounds, all of which the suite regenerates.
The audit replays them with the float64 reference instead of reading the device's weights
before the round, which a backend could notice (docs/benchmarking.md, "Audited rounds").
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from pytest_gostcnn.model import executor
from pytest_gostcnn.model.dtypes import PRECISIONS, master_dtype
from pytest_gostcnn.model.network import Network

from .error_model import ErrorModelKernels, ValueAndVariance


def replay(
    network: Network,
    dtype: str,
    drawn: executor.Weights,
    earlier: Iterable[tuple[np.ndarray, np.ndarray]],
) -> dict[int, dict[str, ValueAndVariance]]:
    """The weights after training iterations on ``earlier`` (the host image and output
    residual of each round, in order) from the ``drawn`` weights, with the error a correct
    implementation may have gathered in them.

    Each iteration runs the float64 reference and its error model on the values the
    backend is handed (image, residual and loaded weights rounded to ``dtype``); after each
    update the weights are rounded to the type they are kept in (``master_dtype``: float32
    for float16 training) and carry the update's modelled error into the next round. The
    drift must be carried: a correct implementation's gradients err within their СКОП, its
    weights drift from the reference's by that much each round, and the rounds after read
    them: the plain reference alone fails a correct backend (docs/benchmarking.md,
    "Audited rounds").
    """
    precision = PRECISIONS[dtype]
    model = ErrorModelKernels(precision, PRECISIONS[master_dtype(dtype)])
    stored = PRECISIONS[master_dtype(dtype)].round
    values = {
        n: {k: precision.round(np.asarray(a, dtype=np.float64)) for k, a in ws.items()}
        for n, ws in drawn.items()
    }
    carried = {n: {k: np.zeros_like(a) for k, a in ws.items()} for n, ws in values.items()}
    for image, residual in earlier:
        weights = {
            n: {k: read(model, values[n][k], carried[n][k]) for k in ws} for n, ws in values.items()
        }
        executor.train(
            network,
            model,
            weights,
            model.bound(precision.round(np.asarray(image, dtype=np.float64))),
            model.bound(precision.round(np.asarray(residual, dtype=np.float64))),
        )
        for n, ws in weights.items():
            for k, w in ws.items():
                # The read's rounding (a float16 copy of a float32 master) is made anew
                # each round, not carried: only the update's error is.
                carried[n][k] = np.maximum(w.var - read(model, values[n][k], 0.0).var, 0.0)
                values[n][k] = stored(w.value)
    return {
        n: {k: read(model, values[n][k], carried[n][k]) for k in ws} for n, ws in values.items()
    }


def read(model: ErrorModelKernels, value: np.ndarray, carried) -> ValueAndVariance:
    """Weights kept as ``value`` (in the master type) with ``carried`` error variance, as
    forward and backward read them: rounded to the data type, whose error adds."""
    bounded = model.bound(value)
    return ValueAndVariance(
        bounded.value, bounded.var + carried, bounded.storage, bounded.underflow
    )
