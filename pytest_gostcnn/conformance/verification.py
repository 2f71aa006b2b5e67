"""Section 8: verify a backend against the float64 reference, one layer step or one network,
and check a timed round of section 9 by the same rule (standard.md §6).

The names in one place; they live by what they hold: the verdicts (``verdicts.py``), what
every verification shares (``harness.py``), a network (``network.py``), a layer step
(``layer.py``) and a timed round's check (``timed_check.py``).
"""

from pytest_gostcnn.model.dtypes import HOST_DTYPES

from .harness import (
    MEAN_ERROR_SIGMAS,
    MIN_NONZERO_SHARE,
    ContractError,
    SuiteError,
    check_array,
    mean_error_check,
    rmse,
    untrustworthy,
)
from .layer import STEPS, LayerData, layer_steps, prepare_layer, verify_layer
from .network import verify_network
from .timed_check import DeliveredRound, bound_weights, verify_round, verify_unit
from .verdicts import (
    CORRECT,
    FAILED_VERDICTS,
    MEAN_ERROR,
    NOT_CORRECT,
    NOT_VERIFIED,
    PASSED_VERDICTS,
    REFERENCE_GRADE,
    ArrayCheck,
    Verification,
    verdict,
)

__all__ = [
    "CORRECT",
    "FAILED_VERDICTS",
    "HOST_DTYPES",
    "MEAN_ERROR",
    "MEAN_ERROR_SIGMAS",
    "MIN_NONZERO_SHARE",
    "NOT_CORRECT",
    "NOT_VERIFIED",
    "PASSED_VERDICTS",
    "REFERENCE_GRADE",
    "STEPS",
    "ArrayCheck",
    "ContractError",
    "LayerData",
    "SuiteError",
    "Verification",
    "check_array",
    "mean_error_check",
    "layer_steps",
    "prepare_layer",
    "rmse",
    "untrustworthy",
    "verdict",
    "verify_layer",
    "verify_network",
    "verify_round",
    "verify_unit",
    "bound_weights",
    "DeliveredRound",
]
