"""int8 inference on the PyTorch backend (``backends/torch/integer.py``): QNNPACK's exact
int32 sums under the fixed-point model of docs/standard.md §6, at small shapes; fbgemm's
pairs of products saturated at int16 (a CPU without VNNI) fail section 8; no integer type
elsewhere, refused in one line naming the type and the device.
"""

import types

import numpy as np
import pytest
from gost_helpers import MARGIN

from pytest_gostcnn.backend import BackendError
from pytest_gostcnn.backends.torch import TorchBackend
from pytest_gostcnn.backends.torch import backend as torch_backend
from pytest_gostcnn.conformance.layer_cases import layer_cases, saturating_cases
from pytest_gostcnn.conformance.verification import (
    CORRECT,
    NOT_CORRECT,
    REFERENCE_GRADE,
    verify_layer,
    verify_network,
)

pytestmark = pytest.mark.skipif(
    torch_backend.torch is None, reason=f"{torch_backend.INSTALL_HINT} (CI installs it)"
)
PASSED = (CORRECT, REFERENCE_GRADE)
WEIGHTED = ("conv", "depthwise", "fc")


def int8(backend_class=TorchBackend):
    return backend_class("int8", options={"device": "cpu"})


def verify(backend, case, saturating=False):
    return verify_layer(
        backend,
        case.layer,
        "forward",
        2,
        seed=11,
        subject="forward",
        draw_input=case.draw_input,
        saturating=saturating,
    )


def has_vnni() -> bool:
    """Whether the CPU has an int8 dot product that sums in int32 (fbgemm's exact path)."""
    with open("/proc/cpuinfo", encoding="utf-8") as file:
        flags = set(file.read().split())
    return bool(flags & {"avx512_vnni", "avx_vnni", "amx_int8"})


def test_every_small_layer_case_and_every_saturating_one_is_correct():
    # Integer items also judge the mean error (a rounding that leans one way) and, in the
    # saturating ones, values past the range (docs/standard.md §6).
    backend = int8()
    for case in layer_cases():
        result = verify(backend, case)
        assert result.verdict in PASSED, (case.layer.type.name, case.tag, result.first_failure)
    for case in saturating_cases():
        result = verify(backend, case, saturating=True)
        assert result.verdict in PASSED, (case.layer.type.name, case.tag, result.first_failure)


def test_a_network_is_correct(shipped_networks):
    result = verify_network(int8(), shipped_networks["Sh"], "inference", 1, seed=11)
    assert result.verdict in PASSED, result.first_failure


def test_maps_come_to_the_host_as_their_int8_integers_and_weights_are_packed_once():
    backend = int8()
    host = np.arange(-6, 6, dtype=np.int8).reshape(1, 2, 2, 3)
    assert backend.to_host(backend.to_device(host)).dtype == np.int8
    with pytest.raises(TypeError, match="expected integers, got float64"):
        backend.to_device(host.astype(np.float64))
    case = next(c for c in layer_cases() if c.layer.type.name == "conv")
    verify(backend, case)
    packed = dict(backend.integer.packed)
    verify(backend, case)  # new weights, new scales: packed again
    assert backend.integer.packed[case.layer.number][3] is not packed[case.layer.number][3]
    assert backend.system()["arithmetic"]["sums"].startswith("int32, exact")


@pytest.mark.skipif(has_vnni(), reason="this CPU has VNNI: fbgemm's int8 sums are exact here")
def test_fbgemms_pairs_of_products_saturated_at_int16_fail_the_weighted_layers():
    # Measured on an AVX2 CPU: conv 15x to 105x, depthwise 26x to 58x, FC 26x (one FC case
    # of 6 products per output stays inside int16 and passes).
    backend = int8(_fbgemm())
    results = [verify(backend, c) for c in layer_cases() if c.layer.type.name in WEIGHTED]
    failed = [r for r in results if r.verdict == NOT_CORRECT]
    assert len(failed) >= len(results) - 1, [r.first_failure for r in results]
    assert all(r.worst.ratio >= MARGIN for r in failed), [r.worst.describe() for r in failed]


def _fbgemm():
    import gost_test_backends

    return gost_test_backends.TorchInt8Fbgemm


def test_integer_types_without_an_engine_are_refused_in_one_line_naming_type_and_device(
    monkeypatch,
):
    import torch

    from pytest_gostcnn.backends.torch.integer import engine_problem

    assert engine_problem("int8", torch.device("cpu")) is None
    for dtype, device, says in (
        ("int16", "cpu", "int16 on cpu: PyTorch's quantized engines convolve 8-bit integers"),
        ("int8", "cuda:0", "int8 on cuda:0: PyTorch has no integer convolution for cuda"),
    ):
        problem = engine_problem(dtype, torch.device(device))
        assert problem.startswith(says) and "\n" not in problem
    monkeypatch.setattr(
        torch.backends, "quantized", types.SimpleNamespace(supported_engines=["fbgemm"])
    )
    assert engine_problem("int8", torch.device("cpu")).startswith("int8 on cpu: this PyTorch")
    with pytest.raises(BackendError, match="^int16 on cpu: "):
        TorchBackend("int16", options={"device": "cpu"})
