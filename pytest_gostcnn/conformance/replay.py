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
from pytest_gostcnn.reference import ReferenceKernels

from .error_model import Bounded, ErrorModelKernels


def replay(
    network: Network,
    dtype: str,
    drawn: executor.Weights,
    earlier: Iterable[tuple[np.ndarray, np.ndarray]],
) -> executor.Weights:
    """The weights after training iterations on ``earlier`` (the host image and output
    residual of each round, in order) from the ``drawn`` weights, as a correct
    implementation keeps them.

    Each iteration runs the float64 reference on the values the backend is handed (image,
    residual and loaded weights rounded to ``dtype``); after each update the weights are
    rounded to the type they are kept in (``master_dtype``), as the implementation keeps
    them. Where that type is wider than the data type (float16 training, float32 masters),
    the error model runs too and the weights come back ``Bounded``: see ``_drifted``.
    """
    if master_dtype(dtype) != dtype:
        return _drifted(network, dtype, drawn, earlier)
    representable = PRECISIONS[dtype].round
    kernels = ReferenceKernels()
    weights = {
        n: {k: representable(np.asarray(a, dtype=np.float64)) for k, a in ws.items()}
        for n, ws in drawn.items()
    }
    for image, residual in earlier:
        executor.train(
            network,
            kernels,
            weights,
            representable(np.asarray(image, dtype=np.float64)),
            representable(np.asarray(residual, dtype=np.float64)),
        )
        weights = {n: {k: representable(a) for k, a in ws.items()} for n, ws in weights.items()}
    return weights


def _drifted(
    network: Network,
    dtype: str,
    drawn: executor.Weights,
    earlier: Iterable[tuple[np.ndarray, np.ndarray]],
) -> dict[int, dict[str, Bounded]]:
    """``replay`` with the error model beside the reference: each round's update carries its
    modelled error into the next, so the drift of a segment is in the audit's СКОП.

    Needed where forward and backward compute in a type coarser than the weights are kept
    in: float16 training's gradients err by far more than a float32 master's rounding (its
    small benchmark residuals lie among float16's subnormals), and the masters drift from
    the reference's by that much, legitimately, round after round.
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


def read(model: ErrorModelKernels, value: np.ndarray, carried) -> Bounded:
    """Weights kept as ``value`` (in the master type) with ``carried`` error variance, as
    forward and backward read them: rounded to the data type, whose error adds."""
    bounded = model.bound(value)
    return Bounded(bounded.value, bounded.var + carried, bounded.storage, bounded.underflow)
