"""СКОП, the admissible RMSE of each compared array (standard.md §6), derived analytically.

The float64 reference runs with an error model beside it: each array is a ``ValueAndVariance``:
its value and the variance a rounding implementation's error may have there, propagated by
one rule per layer type (``RULES``); docs/verification.md derives every term. The kernels
that run the rules are ``error_kernels.ErrorModelKernels``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from array_api_compat import array_namespace

from pytest_gostcnn.machine.pool import elementwise
from pytest_gostcnn.reference.library import Array

# A decision is uncertain when the reference value is within this many standard deviations
# of the implementation's error from the decision boundary.
UNCERTAINTY = 4.0
# СКОП = SAFETY * the RMS of the modelled error: the model is an estimate, not a worst case.
SAFETY = 2.0


# The rule by which each layer type's error follows from its inputs' (docs/verification.md):
# ``error_kernels.ErrorModelKernels._forward_<rule>`` and ``_backward_<rule>``. A layer type
# without a rule here has no СКОП: the lookup fails loudly rather than guess.
RULES: dict[str, str] = {
    "conv": "weighted",
    "depthwise": "weighted",
    "fc": "weighted",
    "relu": "relu",
    "maxpool": "maxpool",
    "avgpool": "avgpool",
    "eltwise": "eltwise",
    "concat": "moved",
    "split": "moved",
    "shuffle": "moved",
}


class NoErrorRule(LookupError):
    """A layer type the error model has no rule for, so no СКОП can be derived."""


def rule(type_name: str) -> str:
    """The error model's rule for a layer type; ``NoErrorRule`` for a type it lacks."""
    try:
        return RULES[type_name]
    except KeyError:
        raise NoErrorRule(
            f"the error model behind СКОП has no rule for layer type {type_name!r}; add one "
            "to RULES in pytest_gostcnn/conformance/error_model.py"
        ) from None


class ValueAndVariance:
    """A float64 reference array and the variance of an implementation's error per element,
    both arrays of the reference's library (``reference.library``); a network item's kept
    output holds the variance's mean alone, a 0-d array (``sliced.VALUES``)."""

    __slots__ = ("value", "var", "storage", "underflow")

    def __init__(self, value: Array, var: Array, storage: float, underflow: float = 0.0) -> None:
        self.value, self.var, self.storage, self.underflow = value, var, storage, underflow

    @property
    def shape(self) -> tuple[int, ...]:
        return self.value.shape

    def __add__(self, other: ValueAndVariance) -> ValueAndVariance:
        """The sum of two residuals at a fan-out: both errors, and the sum's rounding."""
        u, tiny = self.storage, self.underflow

        def chain(a, b, a_var, b_var):
            total = a + b
            return total, a_var + b_var + (u * total) ** 2 + tiny**2

        total, var = elementwise(chain, self.value, other.value, self.var, other.var)
        return ValueAndVariance(total, var, u, tiny)


class GradientPart(NamedTuple):
    """One weight array's gradient over some images, with the sums its error adds up from:
    ``magnitude`` sum |x| |r|, ``read`` sum (var(x) + c x^2) r^2, ``coherent`` sum |x| sd(r)
    (``ErrorModelKernels.gradient_part``). Parts of two slices of a batch add up (``+=``)."""

    value: Array
    magnitude: Array
    read: Array
    coherent: Array

    def __iadd__(self, other: GradientPart) -> GradientPart:
        """``other``'s sums added into these arrays, in place."""
        for held, part in zip(self, other, strict=True):
            held += part
        return self


def admissible_rmse(array: ValueAndVariance) -> float:
    """СКОП of one array: ``SAFETY`` times the RMS of its modelled error."""
    return SAFETY * math.sqrt(float(array_namespace(array.var).mean(array.var)))
