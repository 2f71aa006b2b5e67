"""The float64 reference with its error model over a batch a slice of its images at a time,
within the memory its library may take (``ReferenceLibrary.memory``,
``model/memory.py``): what section 8's network items, the checks and their replays run
for their iteration (one call in place of ``executor.train``).

The bound holds the reference's own work and what the caller says it holds whole beside
(``held``: a network item's results, ``memory.results_held``). The host data is read a
slice at a time (an array, or ``model.data.draw_slices``: never drawn whole). Each slice is
rounded to the data type and bound as the backend is handed it, on the
reference's library and device; each weight gradient and its variance are summed slice by
slice in order (``executor.train_in_slices``). One slice gives the values of the
whole batch at once; several change them at float64 rounding (standard.md §6, "Where the
reference runs").
"""

from __future__ import annotations

import math

import numpy as np
from array_api_compat import array_namespace, device

from pytest_gostcnn.model import executor
from pytest_gostcnn.model.data import DrawnBatch
from pytest_gostcnn.model.memory import batch_slices
from pytest_gostcnn.model.network import Network

from .error_kernels import ErrorModelKernels
from .error_model import ValueAndVariance

# A batch's host data: an array, or a draw read a slice at a time.
HostData = np.ndarray | DrawnBatch
# How an iteration keeps its output and input residual: each whole, value and variance;
# or each value whole and its variance as its mean, which is all СКОП reads
# (``error_model.admissible_rmse``): a network item's, held until the backend has run.
WHOLE, VALUES = "whole", "values"


def reference_training(
    network: Network,
    model: ErrorModelKernels,
    weights: dict[int, dict[str, ValueAndVariance]],
    image: HostData,
    out_residual: HostData,
    held: int = 0,
    keep: str | None = WHOLE,
) -> executor.TrainingResult:
    """One training iteration of the reference with its error model on the host ``image``
    and ``out_residual``; ``weights`` are updated in place.

    Args:
        held: bytes the caller holds whole beside, counted in the bound.
        keep: how the output and input residual are kept: ``WHOLE``, ``VALUES`` or None
            (not at all: a replay compares weights alone).
    """
    batch = image.shape[0]
    spans = batch_slices(network, batch, model.library.memory, error_model=True, held=held)
    joined = _Joined(batch, len(spans), keep == VALUES)
    gradients = executor.train_in_slices(
        network,
        model,
        weights,
        spans,
        lambda span: (_bound(model, image[span]), _bound(model, out_residual[span])),
        joined.take if keep else lambda *parts: None,
    )
    output, input_residual = joined.arrays() if keep else (None, None)
    return executor.TrainingResult(output, input_residual, gradients)


def reference_inference(
    network: Network,
    model: ErrorModelKernels,
    weights: dict[int, dict[str, ValueAndVariance]],
    image: HostData,
    held: int = 0,
    keep: str = WHOLE,
) -> ValueAndVariance:
    """The reference's output with its error model for the host ``image``, a slice at a
    time within the training iteration's bound (inference keeps less); ``keep`` as
    ``reference_training``'s."""
    batch = image.shape[0]
    spans = batch_slices(network, batch, model.library.memory, error_model=True, held=held)
    joined = _Joined(batch, len(spans), keep == VALUES)
    for span in spans:
        joined.take(span, executor.infer(network, model, weights, _bound(model, image[span])))
    return joined.arrays()[0]


def _bound(model: ErrorModelKernels, host: np.ndarray) -> ValueAndVariance:
    """A host slice as the backend is handed it: rounded to the data type, on the
    reference's library with its rounding's error."""
    return model.bound(model.precision.round(np.asarray(host, dtype=np.float64)))


class _Joined:
    """Results of a batch's slices, each whole (a single slice's arrays as they are), or
    with ``mean_variance`` each variance summed slice by slice in order into its mean."""

    def __init__(self, batch: int, slices: int, mean_variance: bool) -> None:
        self.batch, self.slices, self.mean_variance = batch, slices, mean_variance
        self.parts: list[ValueAndVariance] = []
        self.variances: list = []  # the variances' sums, with ``mean_variance``

    def take(self, span: slice, *parts: ValueAndVariance) -> None:
        if self.mean_variance:
            sums = [array_namespace(p.var).sum(p.var) for p in parts]
            held = self.variances or [0.0] * len(sums)
            self.variances = [a + b for a, b in zip(held, sums, strict=True)]
            parts = tuple(ValueAndVariance(p.value, None, p.storage, p.underflow) for p in parts)
        if self.slices == 1:
            self.parts = list(parts)
            return
        if not self.parts:
            self.parts = [
                ValueAndVariance(
                    self._empty(p.value),
                    None if self.mean_variance else self._empty(p.var),
                    p.storage,
                    p.underflow,
                )
                for p in parts
            ]
        for whole, part in zip(self.parts, parts, strict=True):
            whole.value[span] = part.value
            if not self.mean_variance:
                whole.var[span] = part.var

    def arrays(self) -> list[ValueAndVariance]:
        """The joined results; with ``mean_variance`` each variance a 0-d array, its mean."""
        if not self.mean_variance:
            return self.parts
        return [
            ValueAndVariance(p.value, total / math.prod(p.shape), p.storage, p.underflow)
            for p, total in zip(self.parts, self.variances, strict=True)
        ]

    def _empty(self, like):
        xp = array_namespace(like)
        return xp.empty((self.batch, *like.shape[1:]), dtype=like.dtype, device=device(like))
