"""The weights through a checked training unit, rebuilt on the host for its check.

A unit starts from the drawn weights (a segment's start) or from the suite's copy of the
weights the backend held when the unit before it ended (``performance/kept.py``); its
later rounds' weights follow from those and the images and residuals of its earlier rounds,
which the suite rebuilds from their keys (docs/verification.md, "Checked rounds").
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from array_api_compat import array_namespace

from pytest_gostcnn.machine.pool import elementwise
from pytest_gostcnn.model import executor
from pytest_gostcnn.model.dtypes import PRECISIONS, master_dtype
from pytest_gostcnn.model.network import Network
from pytest_gostcnn.reference.library import NUMPY, ReferenceLibrary, to_numpy

from .error_kernels import ErrorModelKernels
from .error_model import ValueAndVariance
from .sliced import reference_training


class Replay:
    """The weights through one unit's rounds, replayed from its ``start`` a round at a time
    (``advance``, or a check's own iteration of each round, ``keep``).

    Each iteration runs the float64 reference and its error model on the values the
    backend is handed (image, residual and loaded weights rounded to ``dtype``); after each
    update the weights are rounded to the type they are kept in (``master_dtype``: float32
    for float16 training) and carry the update's modelled error into the next round. The
    drift must be carried: a correct implementation's gradients err within their СКОП, its
    weights drift from the reference's by that much each round, and the rounds after read
    them: the plain reference alone fails a correct backend (docs/benchmarking.md,
    "Checked rounds"). The weights' values are kept on the host, their carried error on the
    reference's ``library``.
    """

    def __init__(
        self,
        network: Network,
        dtype: str,
        start: executor.Weights,
        library: ReferenceLibrary = NUMPY,
        kept: bool = False,
    ) -> None:
        """``start``: the drawn host weights (rounded here to ``dtype``, as loading hands
        them over), or with ``kept`` the backend's own weights, already in the type they are
        kept in. Either is exact as given: the first round's error is its own."""
        self.network = network
        self.precision = PRECISIONS[dtype]
        # The start carries its rounding alone; from the first update on, the weights carry
        # an error of their own (``ErrorModelKernels.carried``, set by ``keep``).
        self.model = ErrorModelKernels(self.precision, PRECISIONS[master_dtype(dtype)], library)
        self.stored = PRECISIONS[master_dtype(dtype)].round
        rounding = self.stored if kept else self.precision.round
        self.values = {
            n: {k: rounding(np.asarray(a, dtype=np.float64)) for k, a in ws.items()}
            for n, ws in start.items()
        }
        self.carried = {
            n: {k: library.asarray(np.zeros_like(a)) for k, a in ws.items()}
            for n, ws in self.values.items()
        }
        self.rounds = 0  # the rounds replayed so far

    def advance(self, rounds: Iterable[tuple[np.ndarray, np.ndarray]]) -> None:
        """Replay ``rounds`` (the host image and output residual of each, in order)."""
        for image, residual in rounds:
            weights = self.weights()
            reference_training(self.network, self.model, weights, image, residual, keep=None)
            self.keep(weights)

    def keep(self, weights: dict[int, dict[str, ValueAndVariance]]) -> None:
        """Take ``weights``, the reference's after one more round from ``weights()`` (the
        round replayed, or the check's own iteration of it), as the replay's next state."""
        for n, ws in weights.items():
            for k, w in ws.items():
                # The read's rounding (a float16 copy of a float32 master) is made anew
                # each round, not carried: only the update's error is.
                xp = array_namespace(w.var)
                self.carried[n][k] = xp.maximum(
                    w.var - read(self.model, self.values[n][k], 0.0).var, 0.0
                )
                self.values[n][k] = self.stored(to_numpy(w.value))
        self.rounds += 1
        self.model.carried = True

    def weights(self) -> dict[int, dict[str, ValueAndVariance]]:
        """The weights after the rounds replayed, with the error they may have gathered."""
        return {
            n: {k: read(self.model, self.values[n][k], self.carried[n][k]) for k in ws}
            for n, ws in self.values.items()
        }


def read(model: ErrorModelKernels, value: np.ndarray, carried) -> ValueAndVariance:
    """Weights kept as ``value`` (in the master type) with ``carried`` error variance, as
    forward and backward read them: rounded to the data type, whose error adds."""
    bounded = model.bound(value)
    var = elementwise(lambda a, b: a + b, bounded.var, carried)
    return ValueAndVariance(bounded.value, var, bounded.storage, bounded.underflow)
