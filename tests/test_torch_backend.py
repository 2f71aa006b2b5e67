"""The PyTorch backend (``--gost-backend=torch``) passes section 8, at small shapes.

CI installs PyTorch's CPU build (.ci/run); elsewhere the tests that compute skip, saying
so. The full check is the shipped suite by hand, ``pytest --gost-backend=torch``
(docs/performance.md gives its time). Every test here keeps to small shapes and batch 1:
the layer cases, Ш in both modes and М in inference (which hold every layer type), and one
run of the suite's max pooling items on the mutant.
"""

import json
import os
import subprocess
import sys

import gost_test_backends
import numpy as np
import pytest
from gost_helpers import BACKENDS, HALF, MARGIN

from pytest_gostcnn.backend import BackendError, load_backend_class
from pytest_gostcnn.backends.torch import TorchBackend
from pytest_gostcnn.backends.torch import backend as torch_backend
from pytest_gostcnn.conformance.layer_cases import layer_cases
from pytest_gostcnn.conformance.verification import (
    CORRECT,
    NOT_CORRECT,
    REFERENCE_GRADE,
    layer_steps,
    verify_layer,
    verify_network,
)
from pytest_gostcnn.model.layers import LAYER_TYPES
from pytest_gostcnn.performance.cells import Cells
from pytest_gostcnn.run.options import Options
from pytest_gostcnn.run.report import configuration_fields
from pytest_gostcnn.run.resolution import resolve

PASSED = (CORRECT, REFERENCE_GRADE)
needs_torch = pytest.mark.skipif(
    torch_backend.torch is None, reason=f"{torch_backend.INSTALL_HINT} (CI installs it)"
)
CASES = layer_cases()
ONE_CELL = Cells(rank=0, size=1, local_rank=0)


def case_id(case) -> str:
    return f"{case.layer.type.name}-{case.tag}"


def verify_steps(backend, case, batch=2, seed=11):
    return [
        verify_layer(
            backend, case.layer, step, batch, seed=seed, subject=step, draw_input=case.draw_input
        )
        for step in layer_steps(case.layer)
    ]


# Without PyTorch: one clear reason. ------------------------------------------------------


def test_without_pytorch_the_reason_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr(torch_backend, "_import_problem", torch_backend.INSTALL_HINT)
    reason = TorchBackend.unavailable_reason()
    assert reason.startswith("PyTorch is not installed: ")
    assert "--index-url https://download.pytorch.org/whl/cpu" in reason


def test_the_torch_backend_is_registered_and_declares_its_device_option():
    assert load_backend_class("torch") is TorchBackend
    assert list(TorchBackend.backend_options) == ["device"]


def test_the_onednn_version_is_read_from_pytorchs_build_description():
    text = "  - Intel(R) MKL-DNN v3.12.0 (Git Hash 80afa71)\n  - OpenMP 201511"
    assert torch_backend.onednn_version(text) == "3.12.0"
    assert torch_backend.onednn_version("  - oneDNN v3.7.1 (Git Hash 1)") == "3.7.1"
    assert torch_backend.onednn_version("no such library") is None


def test_openmp_threads_wait_passively_unless_the_environment_says_otherwise():
    # Spinning OpenMP threads made PyTorch 5 to 20 times slower on shared cores. The module
    # sets the policy before it imports PyTorch, which is kept out here (5 s a process).
    code = "import os, sys; sys.modules['torch'] = None; import pytest_gostcnn.backends.torch; "
    code += "print(os.environ['OMP_WAIT_POLICY'])"
    for given, expected in ((None, "PASSIVE"), ("ACTIVE", "ACTIVE")):
        env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
        if given:
            env["OMP_WAIT_POLICY"] = given
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True)
        assert done.stdout.decode().strip() == expected, done.stderr.decode()


# Section 8 at small shapes. --------------------------------------------------------------


@needs_torch
def test_every_step_of_every_small_layer_case_is_correct_within_half_the_threshold():
    assert {case.layer.type.name for case in CASES} == set(LAYER_TYPES)
    backend = TorchBackend("float32", options={"device": "cpu"})
    for case in CASES:
        for result in verify_steps(backend, case, batch=3):
            assert result.verdict in PASSED, (case_id(case), result.subject, result.first_failure)
            assert result.worst.ratio <= HALF, (case_id(case), result.worst.describe())


@needs_torch
@pytest.mark.parametrize(
    ("latin", "mode"), [("Sh", "inference"), ("Sh", "training"), ("M", "inference")]
)
def test_networks_are_correct_within_half_the_threshold(shipped_networks, latin, mode):
    # Ш: split, concat, shuffle, depthwise, max pooling, FC; М: depthwise at 112x112.
    result = verify_network(TorchBackend("float32"), shipped_networks[latin], mode, 1, seed=11)
    assert result.verdict in PASSED, result.first_failure
    assert result.worst.ratio <= HALF, result.worst.describe()


@needs_torch
def test_max_pooling_backward_is_the_same_with_out_given_or_recomputed():
    # The network executor may hand backward no OUT; max pooling then recomputes it.
    backend = TorchBackend("float32")
    for case in (c for c in CASES if c.layer.type.name == "maxpool"):
        x = backend.to_device(
            case.draw_input(np.random.default_rng(3), (2, *case.layer.in_shapes[0]))
        )
        out = backend.forward(case.layer, [x], {})
        residual = backend.to_device(np.random.default_rng(4).uniform(-1, 1, out[0].shape))
        given = backend.backward(case.layer, [x], out, [residual], {})[0]
        recomputed = backend.backward(case.layer, [x], [], [residual], {})[0]
        assert np.array_equal(backend.to_host(given), backend.to_host(recomputed)), case.tag


@needs_torch
@pytest.mark.parametrize("tag", ["k3s1p1-ties", "k3s2p1-negative"])
def test_pytorchs_own_max_pooling_fails_the_layer_items(tag):
    # -inf padding fails the all-negative case's forward; one tied maximum fails the
    # ties case's backward.
    case = next(c for c in CASES if c.layer.type.name == "maxpool" and c.tag == tag)
    results = verify_steps(gost_test_backends.TorchNativeMaxPool("float32"), case, seed=5)
    failed = [r for r in results if r.verdict == NOT_CORRECT]
    assert failed and all(r.worst.ratio >= MARGIN for r in failed), [r.checks for r in results]
    assert all(r.verdict in PASSED for r in verify_steps(TorchBackend("float32"), case, seed=5))


@needs_torch
def test_the_suite_fails_pytorchs_own_max_pooling_on_its_layer_items(tmp_path):
    (tmp_path / "mymod.py").write_text(BACKENDS.read_text(encoding="utf-8"), "utf-8")
    report = tmp_path / "report.json"
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q"]
    command += ["--gost-backend=mymod:TorchNativeMaxPool", "--gost-networks=Sh"]
    command += ["-m", "not gost_benchmark", "-k", "maxpool", f"--gost-report={report}"]
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, timeout=300)
    assert done.returncode == 1, done.stdout.decode()
    layers = json.loads(report.read_text(encoding="utf-8"))["verification"]["layers"]
    failed = {layer["subject"] for layer in layers if layer["verdict"] == NOT_CORRECT}
    assert any("ties" in subject for subject in failed), failed
    assert any("negative" in subject for subject in failed), failed


# The device option, the facts, the data. -------------------------------------------------


def test_an_unknown_backend_option_is_refused_naming_it_and_the_known_keys():
    options = Options.parse({"backend": "torch", "backend_option": ["devcie=cpu"]})
    with pytest.raises(ValueError) as raised:
        resolve(options, ONE_CELL)
    assert "devcie" in str(raised.value) and "device (" in str(raised.value)


def test_a_backend_without_options_refuses_any_naming_the_key():
    options = Options.parse({"backend": "numpy", "backend_option": ["device=cpu"]})
    with pytest.raises(ValueError, match="no option 'device'; it declares no option"):
        resolve(options, ONE_CELL)


@needs_torch
@pytest.mark.parametrize(
    ("device", "says"),
    [("gpu:0", "not a PyTorch device"), ("meta", "PyTorch has no meta device")],
)
def test_a_device_pytorch_cannot_compute_on_is_refused_naming_it(device, says):
    options = Options.parse({"backend": "torch", "backend_option": [f"device={device}"]})
    with pytest.raises(BackendError, match=f"--gost-backend-option device={device}: {says}"):
        resolve(options, ONE_CELL)


@needs_torch
def test_the_device_and_its_library_versions_are_in_the_report():
    import torch

    options = Options.parse({"backend": "torch", "backend_option": ["device=cpu"]})
    resolved = resolve(options, ONE_CELL)
    fields = configuration_fields(options, resolved)
    assert fields["options"]["backend_options"] == {"device": "cpu"}
    facts = fields["system"]["backend"]
    assert facts["torch"] == torch.__version__ and facts["torch_device"] == "cpu"
    assert facts["onednn"] == torch_backend.onednn_version(torch.__config__.show())
    assert facts["device"].startswith("CPU: ")
    assert resolved.peak is not None and resolved.peak.estimated  # the CPU's, as for NumPy


@needs_torch
def test_the_default_device_is_the_cpu_without_a_gpu():
    import torch

    expected = "cuda:0" if torch.cuda.is_available() else "cpu"
    assert str(TorchBackend("float32").torch_device) == expected


@needs_torch
def test_to_device_copies_and_the_update_adds_w_d_over_b_in_place():
    backend = TorchBackend("float32", options={"device": "cpu"})
    host = np.arange(6, dtype=np.float32).reshape(2, 3)
    w = backend.to_device(host)
    host[0, 0] = 99  # the tensor holds its own copy
    grad = backend.to_device(np.full((2, 3), 4.0))
    weights, before = {"filters": w}, w
    backend.update(None, weights, {"filters": grad}, batch=2)
    assert weights["filters"] is before  # in place
    assert np.array_equal(backend.to_host(w), np.arange(6).reshape(2, 3) + 2.0)
    assert backend.to_host(w).dtype == np.float32
    backend.synchronize()  # the CPU's operators are done when they return
