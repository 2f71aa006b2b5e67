"""The CuPy backend, mostly without a GPU.

Its layer kernels are written once against an array module (``backends/cupy/xp_kernels.py``):
here they run with NumPy through the section 8 verification, in every data type the backend
declares, with the GEMM hook replaced where a GPU would round differently (TF32). The
GPU-only parts that can be checked without a GPU are checked with stand-ins: the cuBLAS
argument mapping against a column-major emulation, the device choice, the unavailable
path. The tests marked ``requires_cuda`` run only where CuPy finds a CUDA device.
"""

import collections
import dataclasses
import re
import types
from collections.abc import Callable
from pathlib import Path

import numpy as np
import nvrtc
import pytest
from gost_helpers import HALF, swept

from pytest_gostcnn import executor, load_network
from pytest_gostcnn.backend import BackendError
from pytest_gostcnn.backends.common import (
    KERNEL_STEPS,
    MissingKernelError,
    has_kernel,
    kernel,
    kernel_set_name,
)
from pytest_gostcnn.backends.cupy import CupyBackend, cublas, cuda_kernels
from pytest_gostcnn.backends.cupy import backend as cupy_backend
from pytest_gostcnn.backends.cupy.backend import INSTALL_HINT, NO_DEVICE, nvidia_driver_version
from pytest_gostcnn.backends.cupy.cublas import OP_N, OP_T, gemm_ex_arguments
from pytest_gostcnn.backends.cupy.rounding import round_bfloat16, round_tf32
from pytest_gostcnn.backends.cupy.xp_backend import XpBackend, device_for_cell
from pytest_gostcnn.backends.cupy.xp_kernels import XpKernels
from pytest_gostcnn.backends.numpy import NumpyBackend
from pytest_gostcnn.backends.numpy import kernels as numpy_kernels
from pytest_gostcnn.conformance.layer_cases import LayerCase, layer_cases
from pytest_gostcnn.conformance.verification import (
    CORRECT,
    NOT_CORRECT,
    REFERENCE_GRADE,
    layer_steps,
    verify_layer,
    verify_network,
)
from pytest_gostcnn.model.data import draw_input, draw_weights
from pytest_gostcnn.model.dtypes import PRECISIONS
from pytest_gostcnn.model.layers import LAYER_TYPES, Layer, LayerType, make_layer
from pytest_gostcnn.model.network import LATIN
from pytest_gostcnn.reference import ReferenceKernels

pytest_plugins = ["pytester"]

FLOAT16_MAX = 65504.0
PASSED = (CORRECT, REFERENCE_GRADE)
CUDA_REASON = CupyBackend.unavailable_reason()
requires_cuda = pytest.mark.skipif(CUDA_REASON is not None, reason=CUDA_REASON or NO_DEVICE)
CASES = layer_cases()
# float16 overflows on section 8 data by design (docs/gpu.md); NumPy warns of it.
OVERFLOWS = pytest.mark.filterwarnings(
    "ignore:overflow encountered:RuntimeWarning", "ignore:invalid value encountered:RuntimeWarning"
)


def case_id(case) -> str:
    return f"{case.layer.type.name}-{case.tag}"


class NumpyXp(XpBackend):
    """The CuPy backend's kernels on NumPy: what CI can verify of it."""

    name = "numpy-xp"
    xp = np

    def __init__(self, dtype="float32", cell=0, gemm=None, workspace_bytes=None):
        super().__init__(dtype, cell)
        if gemm is not None or workspace_bytes is not None:
            self.kernels = XpKernels(
                np, dtype, gemm, workspace_bytes or self.kernels.workspace_bytes
            )

    def device(self):
        return "CPU: the xp kernels on NumPy"


def tf32_gemm(truncate: bool):
    """A float32 GEMM that first cuts its factors to TF32's 10 mantissa bits, as tensor
    cores do: to nearest, or truncated (the worst a device may do)."""

    def cut(a):
        bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
        if truncate:
            bits = bits & 0xFFFFE000
        else:
            bits = (bits + (0xFFF + ((bits >> 13) & 1))) & 0xFFFFE000
        return bits.view(np.float32)

    return lambda a, b: cut(a) @ cut(b)


def verify_steps(backend, case, steps=None, batch=2):
    """Every step of ``case``: the worst verification, for the assertion message."""
    results = [
        verify_layer(
            backend, case.layer, step, batch, seed=11, subject=step, draw_input=case.draw_input
        )
        for step in steps or layer_steps(case.layer)
    ]
    return results


# The shared kernels verified on NumPy (section 8). ---------------------------------------


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_the_xp_kernel_set_passes_every_layer_step_in_float32_one_image_per_chunk(case):
    # workspace_bytes=1: the im2col and col2im loops run one image at a time (batch 3).
    backend = NumpyXp("float32", workspace_bytes=1)
    for result in verify_steps(backend, case, batch=3):
        assert result.verdict in PASSED, (result.subject, result.first_failure)
        assert result.worst.ratio <= HALF, (result.subject, result.worst.describe())


@pytest.mark.parametrize(
    ("latin", "mode"),
    [
        ("M", "inference"),
        ("R", "inference"),
        ("Sh", "inference"),
        ("Sh", "training"),
        # М's and Р's training: 10 and 22 s of a 2-core machine; GOST_SWEEP=all runs them.
        swept("M", "training"),
        swept("R", "training"),
    ],
)
def test_the_xp_kernel_set_passes_networks_in_float32_within_half_the_threshold(
    shipped_networks, latin, mode
):
    # М: depthwise; Р: fan-out residuals, 1x1 stride-2 projection; Ш: split, concat, shuffle.
    result = verify_network(NumpyXp("float32"), shipped_networks[latin], mode, 2, seed=11)
    assert result.verdict in PASSED, result.first_failure
    assert result.worst.ratio <= HALF, result.worst.describe()


@pytest.mark.parametrize("truncate", [False, True], ids=["rounding", "truncating"])
def test_tf32_passes_whether_the_device_rounds_or_truncates_factors(shipped_networks, truncate):
    # The TF32 error model assumes factors rounded to nearest. Tensor cores may instead
    # drop the low 13 bits: on unrounded factors that fails Р inference by 4x (measured).
    # The kernels round the factors first (round_tf32), so truncating them changes nothing.
    backend = NumpyXp("tf32", gemm=tf32_gemm(truncate))
    for case in CASES:
        for result in verify_steps(backend, case):
            assert result.verdict in PASSED, (case_id(case), result.first_failure)
            assert result.worst.ratio <= HALF, (case_id(case), result.worst.describe())
    result = verify_network(backend, shipped_networks["R"], "inference", 2, seed=11)
    assert result.verdict in PASSED, result.first_failure


def test_bfloat16_passes_every_layer_step_and_two_networks(shipped_networks):
    backend = NumpyXp("bfloat16")
    for case in CASES:
        for result in verify_steps(backend, case, steps=("forward", "backward")):
            assert result.verdict in PASSED, (case_id(case), result.first_failure)
    for latin in ("M", "Sh"):
        result = verify_network(backend, shipped_networks[latin], "inference", 2, seed=11)
        assert result.verdict in PASSED, result.first_failure


def test_bfloat16_values_are_held_in_float32_arrays_rounded_to_bfloat16(shipped_networks):
    network = shipped_networks["Sh"]
    backend = NumpyXp("bfloat16")
    rng = np.random.default_rng(0)
    weights = backend.load_weights(network, draw_weights(network, rng))
    output = backend.infer(network, weights, backend.to_device(draw_input(network, 1, rng)))
    host = backend.to_host(output)
    assert host.dtype == np.float32  # verification accepts a float host array for bfloat16
    np.testing.assert_array_equal(host, PRECISIONS["bfloat16"].round(host))


def test_bfloat16_rounding_matches_the_verification_rounding():
    rng = np.random.default_rng(1)
    values = np.concatenate(
        [
            rng.standard_normal(1000) * 10.0 ** rng.integers(-30, 30, 1000),
            [0.0, -0.0, 1.0 + 2**-8, 1.0 + 3 * 2**-8, 3.389e38, -3.4e38, np.inf, -np.inf],
        ]
    ).astype(np.float32)
    expected = PRECISIONS["bfloat16"].round(values).astype(np.float32)
    np.testing.assert_array_equal(round_bfloat16(np, values), expected)
    assert np.isnan(round_bfloat16(np, np.array([np.nan], dtype=np.float32))).all()


# float16: the standard's IEEE binary16, no scaling (docs/gpu.md, "float16 and section 8"). ------


def test_float16_passes_every_forward_and_backward_layer_step():
    backend = NumpyXp("float16")
    for case in CASES:
        for result in verify_steps(backend, case, steps=("forward", "backward")):
            assert result.verdict in PASSED, (case_id(case), result.first_failure)
            assert result.worst.ratio <= HALF, (case_id(case), result.worst.describe())


@pytest.mark.parametrize("case", [c for c in CASES if c.layer.has_weights], ids=case_id)
def test_float16_keeps_gradients_and_master_weights_in_float32_and_passes(case):
    # Section 8 draws IN and OUT_D from U(-127, 128): a filter gradient sums products of
    # size ~1e4 over every position of the batch, past float16's 65504. By the float16
    # training reading (docs/standard.md §6) gradients and master weights are float32.
    backend = NumpyXp("float16")
    for result in verify_steps(backend, case, steps=("gradient", "update")):
        assert result.verdict in PASSED, (result.subject, result.first_failure)
        assert result.worst.ratio <= HALF, (result.subject, result.worst.describe())
    layer, rng = case.layer, np.random.default_rng(3)
    x = backend.to_device(rng.uniform(-127, 128, (2, *layer.in_shapes[0])))
    residual = backend.to_device(rng.uniform(-127, 128, (2, *layer.out_shapes[0])))
    weights = {k: backend.to_device(rng.uniform(-1, 1, s)) for k, s in layer.weight_shapes.items()}
    grads = backend.gradient(layer, [x], [residual])
    assert {g.dtype for g in grads.values()} == {np.dtype(np.float32)}
    backend.update(layer, weights, grads, 2)
    assert {w.dtype for w in weights.values()} == {np.dtype(np.float32)}
    assert backend.forward(layer, [x], weights)[0].dtype == np.float16  # read as float16


# CI: float16, the narrowest range, on every network; each other type on two networks, every
# network on one of them. GOST_SWEEP=all runs every pair (about 80 s on 2 cores).
TYPES_IN_CI = {
    "float16": tuple(LATIN.values()),
    "float32": ("V", "Sh"),
    "tf32": ("G", "R"),
    "bfloat16": ("M", "S"),
}


@pytest.mark.parametrize(
    ("dtype", "latin"),
    [
        swept(dtype, latin, in_ci=latin in TYPES_IN_CI[dtype])
        for dtype in ("float32", "tf32", "bfloat16", "float16")
        for latin in LATIN.values()
    ],
)
def test_every_shipped_network_verifies_in_inference_in_every_type(shipped_networks, dtype, latin):
    # The scaled weight draw (docs/standard.md §6) keeps every value of every shipped
    # network far below float16's 65504, so each type is judged on its arithmetic.
    result = verify_network(NumpyXp(dtype), shipped_networks[latin], "inference", 2, seed=11)
    assert result.verdict in PASSED, result.first_failure
    assert result.worst.ratio <= HALF, result.worst.describe()


@pytest.mark.parametrize("latin", ["R", "Sh"])
def test_float16_training_verifies_with_float32_gradients_and_master_weights(
    shipped_networks, latin
):
    # Р: fan-out residuals and projections; Ш: split, concat, shuffle. The other four pass
    # too (docs/gpu.md gives the command and the ratios); they are slower.
    result = verify_network(NumpyXp("float16"), shipped_networks[latin], "training", 2, seed=11)
    assert result.verdict in PASSED, result.first_failure
    assert result.worst.ratio <= HALF, result.worst.describe()


def test_tf32_draws_are_tf32_values():
    # A weight's factor rounding would be one error shared by every position of a map,
    # which a global average does not shrink (it failed С inference by 1.3x, measured).
    values = PRECISIONS["tf32"].round(np.random.default_rng(0).uniform(-128, 128, 1000))
    bits = values.astype(np.float32).view(np.uint32)
    assert np.all(bits & 0x1FFF == 0)
    np.testing.assert_array_equal(round_tf32(np, values.astype(np.float32)), values)


@OVERFLOWS
def test_float16_cannot_verify_a_shipped_network_under_the_full_range_weight_draw(
    shipped_networks,
):
    network = shipped_networks["Sh"]
    rng = np.random.default_rng(11)
    weights = draw_weights(network, rng, "full-range")
    reference = executor.infer(network, ReferenceKernels(), weights, draw_input(network, 2, rng))
    assert np.abs(reference).max() > FLOAT16_MAX  # about 1e10: the data, not the arithmetic

    result = verify_network(
        NumpyXp("float16"), network, "inference", 2, seed=11, weights="full-range"
    )

    assert result.verdict == NOT_CORRECT
    assert "NaN or Inf" in result.first_failure


SMALL_TABLE = """\
letter: М
name: a network small enough for float16
provenance: reconstruction
input: {X: 6, Y: 6, L: 2}
layers:
  - {n: 1, type: conv, F: 3, Rx: 3, Ry: 3, S: 1, Px: 1, Py: 1}
  - {n: 2, type: relu, in1: 1}
  - {n: 3, type: maxpool, in1: 2, Rx: 2, Ry: 2, S: 2, Px: 0, Py: 0}
  - {n: 4, type: depthwise, in1: 3, Rx: 3, Ry: 3, S: 1, Px: 1, Py: 1}
  - {n: 5, type: avgpool, in1: 4, Rx: 3, Ry: 3, S: 1, Px: 0, Py: 0}
  - {n: 6, type: fc, in1: 5, F: 4}
"""


def test_float16_verifies_a_network_whose_values_fit_float16(tmp_path: Path):
    table = tmp_path / "small.yaml"
    table.write_text(SMALL_TABLE, encoding="utf-8")
    result = verify_network(NumpyXp("float16"), load_network(table), "inference", 2, seed=11)
    assert result.verdict in PASSED, result.first_failure
    assert result.worst.ratio <= HALF, result.worst.describe()


# Dispatch: both kernel sets are looked up the same way (backends/common.py). -------------

KERNEL_SETS = {
    "numpy": numpy_kernels,
    "xp": XpKernels,
    "cuda": cuda_kernels.CudaKernels,
}


def kernel_steps(layer_type: LayerType) -> tuple[str, ...]:
    """The steps of ``layer_type`` that need a kernel: gradient only for a type with weights
    (``weight_shapes`` of any parameters non-empty); update is one function for all types."""
    params = collections.defaultdict(lambda: 1)
    weights = layer_type.weight_shapes(((1, 1, 1),) * layer_type.n_inputs, params)
    return KERNEL_STEPS if weights else KERNEL_STEPS[:2]


def test_kernel_steps_are_the_layer_steps_but_update():
    for case in CASES:
        expected = tuple(s for s in layer_steps(case.layer) if s != "update")
        assert kernel_steps(case.layer.type) == expected, case_id(case)


@pytest.mark.parametrize("kernel_set", KERNEL_SETS.values(), ids=KERNEL_SETS.keys())
@pytest.mark.parametrize("layer_type", LAYER_TYPES.values(), ids=lambda t: t.name)
def test_every_kernel_set_has_a_kernel_for_every_step_of_every_layer_type(kernel_set, layer_type):
    steps = kernel_steps(layer_type)
    missing = [s for s in steps if not has_kernel(kernel_set, layer_type.name, s)]
    assert not missing, (kernel_set_name(kernel_set), layer_type.name, missing)


def layer_of_a_new_type() -> Layer:
    """A convolution whose type is one no kernel set knows (as if just added to the table)."""
    conv = make_layer("conv", [(4, 4, 2)], F=3, Rx=1, Ry=1, S=1, Px=0, Py=0)
    return dataclasses.replace(conv, type=dataclasses.replace(conv.type, name="winograd"))


@pytest.mark.parametrize(
    ("make_backend", "kernel_set"),
    [
        (lambda: NumpyBackend("float32"), "pytest_gostcnn.backends.numpy.kernels"),
        (lambda: NumpyXp("float32"), "pytest_gostcnn.backends.cupy.xp_kernels.XpKernels"),
    ],
    ids=["numpy", "xp"],
)
@pytest.mark.parametrize("step", KERNEL_STEPS)
def test_a_layer_type_without_kernels_is_refused_naming_the_kernel_set_type_and_step(
    make_backend, kernel_set, step
):
    backend, layer = make_backend(), layer_of_a_new_type()
    x = backend.to_device(np.ones((1, *layer.in_shapes[0])))
    weights = {k: backend.to_device(np.ones(s)) for k, s in layer.weight_shapes.items()}
    residual = backend.to_device(np.ones((1, *layer.out_shapes[0])))
    calls = {
        "forward": lambda: backend.forward(layer, [x], weights),
        "backward": lambda: backend.backward(layer, [x], [residual], [residual], weights),
        "gradient": lambda: backend.gradient(layer, [x], [residual]),
    }
    with pytest.raises(MissingKernelError) as raised:
        calls[step]()
    assert str(raised.value) == (
        f"the kernel set {kernel_set} has no {step} kernel for layer type 'winograd' "
        f"(it defines no winograd_{step})"
    )
    assert isinstance(raised.value, BackendError)
    assert not has_kernel(numpy_kernels, "winograd", step)
    assert has_kernel(numpy_kernels, "conv", step) and has_kernel(XpKernels, "conv", step)


def test_the_kernel_lookup_knows_only_the_kernel_steps():
    with pytest.raises(ValueError, match="no kernel step 'update'"):
        kernel(numpy_kernels, layer_of_a_new_type(), "update")


# Declarations, host arrays, the device, the unavailable path. ------------------------------


def test_the_backend_declares_the_standards_floating_types_and_no_integers():
    assert CupyBackend.inference_dtypes == ("float32", "tf32", "float16", "bfloat16")
    assert CupyBackend.training_dtypes == ("float32", "float16")
    assert CupyBackend.name == "cupy"


@pytest.mark.parametrize(
    ("dtype", "host_dtype"),
    [
        ("float32", np.float32),
        ("tf32", np.float32),
        ("float16", np.float16),
        ("bfloat16", np.float32),
    ],
)
def test_to_host_returns_the_type_verification_expects(dtype, host_dtype):
    backend = NumpyXp(dtype)
    host = backend.to_host(backend.to_device(np.array([[1.0, -2.5, 1 / 3]])))
    assert host.dtype == host_dtype
    # TF32 stores float32; only its drawn values and GEMM factors are TF32 values.
    storage = "float32" if dtype == "tf32" else dtype
    np.testing.assert_array_equal(host, PRECISIONS[storage].round(np.array([[1.0, -2.5, 1 / 3]])))


def test_integer_types_are_refused_by_the_kernels():
    with pytest.raises(BackendError, match="int8"):
        XpKernels(np, "int8")


@pytest.mark.parametrize(("cell", "count", "device"), [(0, 1, 0), (3, 1, 0), (5, 4, 1), (7, 8, 7)])
def test_a_cell_takes_its_rank_modulo_the_visible_gpus(cell, count, device):
    assert device_for_cell(cell, count) == device


def test_no_visible_gpu_is_an_error_naming_it():
    with pytest.raises(BackendError, match="no CUDA device"):
        device_for_cell(0, 0)


def fake_cupy(count=None, error=None):
    class CUDARuntimeError(RuntimeError):
        pass

    def get_device_count():
        if error:
            raise CUDARuntimeError(error)
        return count

    runtime = types.SimpleNamespace(
        CUDARuntimeError=CUDARuntimeError, getDeviceCount=get_device_count
    )
    return types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=runtime))


def test_without_cupy_the_reason_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr(cupy_backend, "cupy", None)
    monkeypatch.setattr(cupy_backend, "_import_problem", INSTALL_HINT)
    assert CupyBackend.unavailable_reason() == (
        "CuPy is not installed: pip install 'pytest-gostcnn[cupy]'"
    )


@pytest.mark.parametrize(
    "cupy",
    [fake_cupy(error="cudaErrorInsufficientDriver"), fake_cupy(count=0)],
    ids=["driver", "zero"],
)
def test_without_a_device_the_reason_is_no_cuda_device(monkeypatch, cupy):
    monkeypatch.setattr(cupy_backend, "cupy", cupy)
    assert CupyBackend.unavailable_reason() == "no CUDA device"


@pytest.mark.skipif(CUDA_REASON is None, reason="a CUDA device is present")
def test_pytest_with_the_cupy_backend_skips_every_item_once_without_a_gpu(pytester):
    # In this process: the backend is unavailable, so the run verifies nothing.
    result = pytester.runpytest_inprocess(
        "--gost-backend=pytest_gostcnn.backends.cupy:CupyBackend",
        "--gost-batch=1",
        "--gost-networks=Sh",
        "--gost-mode=inference",
        "-rs",
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # nothing was verified
    output = result.stdout.str()
    assert f"(unavailable: {CUDA_REASON})" in output  # the header says it once
    reports = result.reprec.getreports("pytest_runtest_logreport")
    skipped = [r.nodeid for r in reports if r.skipped]
    assert skipped and len(skipped) == len(set(skipped))  # every item skipped, once
    assert all(CUDA_REASON in str(r.longrepr) for r in reports if r.skipped)
    assert not [r for r in reports if r.failed or (r.passed and r.when == "call")]


class StandInCupy(types.ModuleType):
    """NumPy under CuPy's name, with the few CUDA calls the backend makes answered by an
    imaginary machine of two H200s: the backend's glue runs, only cuBLAS does not."""

    def __init__(self) -> None:
        super().__init__("cupy")
        properties = {
            "name": b"NVIDIA H200",
            "multiProcessorCount": 132,
            "clockRate": 1_980_000,  # kHz
            "major": 9,
            "minor": 0,
            "totalGlobalMem": 150_754_820_096,
        }
        self.synchronized = 0
        self.used: list[int] = []
        self.cuda = types.SimpleNamespace(
            runtime=types.SimpleNamespace(
                CUDARuntimeError=RuntimeError,
                getDeviceCount=lambda: 2,
                getDeviceProperties=lambda index: dict(properties),
                driverGetVersion=lambda: 12040,
                runtimeGetVersion=lambda: 12020,
            ),
            Device=lambda index: types.SimpleNamespace(use=lambda: self.used.append(index)),
            get_current_stream=lambda: types.SimpleNamespace(synchronize=self._synchronize),
        )
        self.asnumpy = np.asarray

    def _synchronize(self) -> None:
        self.synchronized += 1

    def __getattr__(self, name):
        return getattr(np, name)


@pytest.fixture
def stand_in_cupy(monkeypatch):
    cupy = StandInCupy()
    monkeypatch.setattr(cupy_backend, "cupy", cupy)
    monkeypatch.setattr(CupyBackend, "xp", cupy)
    # The shared kernels with xp.matmul: no cuBLAS, no CUDA kernels.
    monkeypatch.setattr(CupyBackend, "make_kernels", XpBackend.make_kernels)
    monkeypatch.setattr(CupyBackend, "make_gemm", lambda self: None)
    return cupy


def test_cupy_backend_glue_on_a_stand_in_cupy(stand_in_cupy):
    backend = CupyBackend("float16", cell=3)

    assert stand_in_cupy.used == [1]  # cell 3 on two GPUs
    assert backend.kernels.workspace_bytes == cupy_backend.MAX_WORKSPACE  # 1/32 of 140 GiB, capped
    assert backend.device() == "GPU 1: NVIDIA H200 (132 SMs)"
    assert backend.peak().macs_per_second == pytest.approx(989.4e12 / 2, rel=2e-3)
    system = backend.system()
    assert (system["gpu"], system["sm_count"], system["compute_capability"]) == (
        "NVIDIA H200",
        132,
        "9.0",
    )
    assert (system["cuda_driver_api"], system["cuda_runtime"]) == ("12.4", "12.2")
    case = next(c for c in CASES if c.layer.type.name == "conv")
    [result] = verify_steps(backend, case, steps=("forward",))
    assert result.verdict in PASSED, result.first_failure
    assert stand_in_cupy.synchronized == 0  # forward-only verification never waits
    backend.synchronize()
    assert stand_in_cupy.synchronized == 1


# The cuBLAS call, checked against a column-major emulation of cublasGemmEx. ---------------


def emulated_gemm_ex(args) -> np.ndarray:
    """What cublasGemmEx computes from these arguments, on the operands' memory."""

    def read(x, op, rows, cols, ld):
        # The op(X) it needs is rows x cols; X itself, column-major, is stored with ld.
        stored = (rows, cols) if op == OP_N else (cols, rows)
        memory = x.ravel(order="K")
        matrix = np.lib.stride_tricks.as_strided(
            memory, shape=stored, strides=(memory.itemsize, ld * memory.itemsize)
        )
        return matrix if op == OP_N else matrix.T

    first = read(args.first, args.transa, args.m, args.k, args.lda)
    second = read(args.second, args.transb, args.k, args.n, args.ldb)
    column_major = first @ second  # m x n, stored with ldc = m: the row-major n x m result
    return column_major.T


@pytest.mark.parametrize("a_layout", ["C", "transposed", "strided"])
@pytest.mark.parametrize("b_layout", ["C", "transposed", "strided"])
def test_gemm_ex_arguments_compute_the_row_major_product(a_layout, b_layout):
    rng = np.random.default_rng(2)

    def operand(rows, cols, layout):
        if layout == "transposed":  # an F-contiguous view, e.g. cols.T in the gradient
            return rng.standard_normal((cols, rows)).T
        if layout == "strided":  # neither C nor F contiguous: copied first
            return rng.standard_normal((rows, 2 * cols))[:, ::2]
        return rng.standard_normal((rows, cols))

    a, b = operand(5, 3, a_layout), operand(3, 4, b_layout)
    args = gemm_ex_arguments(np, a, b)
    assert (args.m, args.n, args.k, args.ldc) == (4, 5, 3, 4)
    assert args.transa == (OP_T if b_layout == "transposed" else OP_N)
    np.testing.assert_allclose(emulated_gemm_ex(args), a @ b, rtol=1e-12)


def test_the_driver_version_is_read_from_the_kernel_module_line():
    text = (
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n"
        "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n"
    )
    assert nvidia_driver_version(text) == "550.54.15"
    assert nvidia_driver_version("no driver here") is None


# On a GPU only. ----------------------------------------------------------------------------


@pytest.mark.gpu
@requires_cuda
@pytest.mark.parametrize("dtype", ["float32", "tf32", "float16", "bfloat16"])
def test_cupy_backend_passes_the_forward_and_backward_layer_steps(dtype):
    backend = CupyBackend(dtype)
    for case in CASES:
        for result in verify_steps(backend, case, steps=("forward", "backward")):
            assert result.verdict in PASSED, (case_id(case), result.first_failure)


@pytest.mark.gpu
@requires_cuda
@pytest.mark.parametrize("mode", ["inference", "training"])
def test_cupy_backend_passes_a_network_in_float32(shipped_networks, mode):
    result = verify_network(CupyBackend("float32"), shipped_networks["R"], mode, 2, seed=11)
    assert result.verdict in PASSED, result.first_failure
    assert result.worst.ratio <= HALF, result.worst.describe()


@pytest.mark.gpu
@requires_cuda
@pytest.mark.parametrize("dtype", ["float32", "tf32", "float16", "bfloat16"])
def test_cublas_gemm_matches_matmul_for_transposed_operands(dtype):
    import cupy

    gemm = cublas.CublasGemm(dtype)
    rng = np.random.default_rng(3)
    a_host = rng.uniform(-1, 1, (70, 40)).astype(np.float32)
    b_host = rng.uniform(-1, 1, (50, 70)).astype(np.float32)
    storage = cupy.float16 if dtype == "float16" else cupy.float32
    a = cupy.asarray(a_host).astype(storage).T  # F-contiguous, as cols.T in a gradient
    b = cupy.asarray(b_host).astype(storage).T
    expected = a_host.T @ b_host.T
    for left in (a, cupy.ascontiguousarray(a)):
        got = cupy.asnumpy(gemm(left, b))
        np.testing.assert_allclose(got, expected, rtol=0, atol=70 * 2**-7)


@pytest.mark.gpu
@requires_cuda
def test_cupy_backend_reports_its_gpu_and_peak():
    backend = CupyBackend("float16", cell=7)
    assert backend.device().startswith(f"GPU {backend.device_index}: ")
    assert backend.system()["gpu"] in backend.device()
    backend.synchronize()


def relative_rms(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.sqrt(np.mean((a - b) ** 2) / max(np.mean(b**2), 1e-300)))


# Window shapes beyond the layer cases: Rx != Ry with Px != Py on 40 channels (more than
# one 32-channel block of the depthwise FILTERS_D kernel).
FUSED_EXTRA_LAYERS = [
    make_layer("depthwise", [(9, 7, 40)], Rx=5, Ry=3, S=2, Px=2, Py=1),
    make_layer("maxpool", [(9, 7, 40)], Rx=3, Ry=2, S=2, Px=1, Py=0),
    make_layer("conv", [(9, 7, 40)], F=36, Rx=3, Ry=2, S=2, Px=1, Py=0),
]


def fused_layers() -> list[tuple[str, Layer, Callable]]:
    """(id, layer, draw) of every layer with a fused CUDA kernel step."""
    fused = [
        (case_id(case), case.layer, case.draw_input)
        for case in CASES
        if case.layer.type.name in ("conv", "depthwise", "maxpool")
    ]
    uniform = LayerCase("extra", FUSED_EXTRA_LAYERS[0]).draw_input
    return fused + [(f"extra-{layer.type.name}", layer, uniform) for layer in FUSED_EXTRA_LAYERS]


@pytest.mark.gpu
@requires_cuda
@pytest.mark.parametrize("dtype", ["float32", "tf32", "float16", "bfloat16"])
def test_the_fused_kernels_compute_what_the_shared_kernels_compute(dtype):
    # backends/cupy/cuda_kernels.py replaces im2col, col2im, depthwise and max pooling steps;
    # each must give the shared xp code's numbers, up to float32 summation order and FMA;
    # max pooling, which only compares and adds in the same order, exactly.
    import cupy

    backend = CupyBackend(dtype)
    fused = backend.kernels
    shared = XpKernels(cupy, dtype, gemm=fused.gemm, workspace_bytes=1)  # chunked too
    rng = np.random.default_rng(5)
    tolerance = {"float32": 1e-6, "tf32": 1e-6, "float16": 2e-3, "bfloat16": 2e-2}[dtype]
    for name, layer, draw in fused_layers():
        inputs = [backend.to_device(draw(rng, (3, *s))) for s in layer.in_shapes]
        weights = {
            key: backend.to_device(rng.uniform(-1, 1, shape))
            for key, shape in layer.weight_shapes.items()
        }
        out_residual = backend.to_device(rng.uniform(-1, 1, (3, *layer.out_shapes[0])))
        outputs = shared.forward(layer, inputs, weights)
        pairs = [(fused.forward(layer, inputs, weights), outputs, "forward")]
        pairs.append(
            (
                fused.backward(layer, inputs, outputs, [out_residual], weights),
                shared.backward(layer, inputs, outputs, [out_residual], weights),
                "backward",
            )
        )
        if weights:
            mine = fused.gradient(layer, inputs, [out_residual])
            theirs = shared.gradient(layer, inputs, [out_residual])
            pairs.append(
                ([mine[k] for k in sorted(mine)], [theirs[k] for k in sorted(theirs)], "gradient")
            )
        for got, expected, step in pairs:
            for g, e in zip(got, expected, strict=True):
                assert g.dtype == e.dtype and g.shape == e.shape, (name, step)
                if layer.type.name == "maxpool":
                    np.testing.assert_array_equal(cupy.asnumpy(g), cupy.asnumpy(e), (name, step))
                    continue
                difference = relative_rms(cupy.asnumpy(g), cupy.asnumpy(e))
                assert difference <= tolerance, (name, step, difference)


@pytest.mark.gpu
@requires_cuda
def test_the_rounding_kernels_round_as_the_shared_code_does_special_values_too():
    import cupy

    values = np.array(
        [
            0.0,
            -0.0,
            1.0 + 2**-8,
            1.0 + 3 * 2**-8,
            1.0 + 2**-11,
            1.0 + 3 * 2**-11,
            3.389e38,
            -3.4e38,
            np.finfo(np.float32).max,
            np.finfo(np.float32).tiny / 3,
            np.inf,
            -np.inf,
            np.nan,
        ],
        dtype=np.float32,
    )
    x = cupy.asarray(values)
    bits = {
        "tf32": round_tf32(np, values).view(np.uint32),
        "bfloat16": round_bfloat16(np, values).view(np.uint32),
        "bfloat16 halves": (round_bfloat16(np, values).view(np.uint32) >> 16).astype(np.uint16),
    }
    for which, expected in bits.items():
        got = cupy.asnumpy(cuda_kernels.elementwise_kernel(cupy, which)(x))
        got = got.view(np.uint32) if got.dtype == np.float32 else got
        np.testing.assert_array_equal(got, expected, which)


# The fused CUDA kernels' glue, without a GPU. ----------------------------------------------


class KernelRecorder(types.ModuleType):
    """NumPy under CuPy's name, whose compiled kernels only record how they are launched
    (name, grid, block, arguments); elementwise kernels copy their input."""

    def __init__(self) -> None:
        super().__init__("cupy")
        self.launches: list[tuple[str, tuple, tuple, tuple]] = []

    def RawModule(self, code, options, name_expressions):  # noqa: N802 (CuPy's name)
        assert code == cuda_kernels.SOURCE and options == cuda_kernels.OPTIONS
        recorder = self

        class Module:
            def get_function(self, name):
                assert name in name_expressions
                return lambda grid, block, args: recorder.launches.append((name, grid, block, args))

        return Module()

    def ElementwiseKernel(self, in_params, out_params, operation, name):  # noqa: N802
        return lambda x: np.array(x, copy=True)

    def __getattr__(self, name):
        return getattr(np, name)


# What a CUDA parameter type takes from Python, given the instance's template arguments:
# a scalar type, or the dtype of the array whose memory it points to.
RAW_DTYPES = {"float": np.float32, "unsigned short": np.float16}
KIND_DTYPES = {"0": np.float32, "1": np.float16, "2": np.float32}


def kernel_signatures() -> dict[str, tuple[list[str], list[str]]]:
    """Each __global__ function of the CUDA source: its template parameters' names and its
    parameters' types (the GEOMETRY macro is ten ints)."""
    found = {}
    pattern = r"template <([^>]*)>\s*__global__ void (\w+)\(([^)]*)\)"
    for match in re.finditer(pattern, cuda_kernels.SOURCE):
        template = [p.split()[-1] for p in match.group(1).split(",")]
        types = []
        for parameter in (p.strip() for p in match.group(3).split(",")):
            types += ["int"] * 10 if parameter == "GEOMETRY" else [parameter.rsplit(" ", 1)[0]]
        found[match.group(2)] = (template, types)
    return found


def expected_argument(type_text: str, template: dict[str, str]):
    """The NumPy scalar type or array dtype a parameter of ``type_text`` must be given."""
    if type_text == "int":
        return np.int32
    if type_text == "i64":
        return np.int64
    assert type_text.endswith("*"), type_text
    if "Storage<K>" in type_text:
        return KIND_DTYPES[template["K"]]
    if re.search(r"\bT\*$", type_text):
        return RAW_DTYPES[template["T"]]
    assert type_text.removeprefix("const ") == "float*", type_text
    return np.float32


def launches_of_training(dtype: str, network) -> list[tuple[str, tuple, tuple, tuple]]:
    """The kernel launches of one training iteration (batch 2) of ``network`` through
    ``CudaKernels``: (kernel instance, grid, block, arguments) of each."""
    recorder = KernelRecorder()
    kernels = cuda_kernels.CudaKernels(recorder, dtype, gemm=None, workspace_bytes=1 << 20)
    loader = NumpyXp(dtype)
    weights = loader.load_weights(network, draw_weights(network, np.random.default_rng(0)))
    image = loader.to_device(draw_input(network, 2, np.random.default_rng(1)))
    residual = loader.to_device(np.zeros((2, *network.output_shape)))
    with np.errstate(all="ignore"):  # the recorder's outputs are uninitialised memory
        executor.train(network, kernels, weights, image, residual)
    return recorder.launches


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_every_fused_kernel_launch_matches_its_cuda_signature(shipped_networks, dtype):
    signatures = kernel_signatures()
    launched = set()
    for latin in ("M", "Sh", "S"):  # depthwise, max pooling, k x k convolutions
        for name, grid, block, args in launches_of_training(dtype, shipped_networks[latin]):
            base, _, rest = name.partition("<")
            names, types = signatures[base]
            values = [v.strip() for v in rest.removesuffix(">").split(",")]
            template = dict(zip(names, values, strict=True))
            launched.add(base)
            assert len(args) == len(types), (name, len(args))
            for position, (arg, type_text) in enumerate(zip(args, types, strict=True)):
                expected = expected_argument(type_text, template)
                if isinstance(arg, np.ndarray):  # kernels index memory as C-ordered
                    assert arg.dtype == expected, (name, position, arg.dtype, type_text)
                    assert arg.flags.c_contiguous, (name, position)
                else:
                    assert type(arg) is expected, (name, position, type(arg), type_text)
            assert all(0 < n < 2**31 for n in (*grid, *block)), (name, grid, block)
    assert launched == set(signatures)  # every kernel of the source is used and checked


def test_the_depthwise_gradient_block_matches_its_shared_memory():
    # The kernel reduces its block's rows in __shared__ float rows[ROWS][CHANNELS].
    rows, channels = cuda_kernels.GRADIENT_ROWS, cuda_kernels.GRADIENT_CHANNELS
    assert f"__shared__ float rows[{rows}][{channels}];" in cuda_kernels.SOURCE


NVRTC = nvrtc.find_library()


@pytest.mark.skipif(NVRTC is None, reason="NVRTC not installed: pip install -e '.[test]'")
@pytest.mark.parametrize("architecture", ["compute_80", "compute_90"])
def test_the_cuda_source_compiles_for_every_instance_the_backend_launches(
    shipped_networks, architecture
):
    names = {
        name
        for dtype in ("float32", "float16", "bfloat16")
        for latin in ("M", "Sh", "S")
        for name, *_ in launches_of_training(dtype, shipped_networks[latin])
    }
    names |= {f"depthwise_gradient<float, {rx}, {ry}>" for rx, ry in ((1, 1), (5, 5), (7, 7))}
    options = [*cuda_kernels.OPTIONS, f"--gpu-architecture={architecture}"]
    lowered = nvrtc.compile_names(cuda_kernels.SOURCE, sorted(names), options)
    assert set(lowered) == names
    # The elementwise kernels' bodies, wrapped as CuPy wraps them: x in, y out.
    c_types = {"float32": "float", "uint16": "unsigned short"}
    for inputs, outputs, body in cuda_kernels.ROUNDING_KERNELS.values():
        x_type, y_type = c_types[inputs.split()[0]], c_types[outputs.split()[0]]
        source = (
            f'extern "C" __global__ void rounded(const {x_type}* xs, {y_type}* ys) '
            f"{{ const {x_type} x = xs[0]; {y_type} y; {body} ys[0] = y; }}"
        )
        assert nvrtc.compile_names(source, [], options) == {}


@pytest.mark.parametrize(
    ("type_name", "shape", "params", "fits"),
    [
        ("conv", (224, 224, 64), dict(F=64, Rx=3, Ry=3, S=1, Px=1, Py=1), True),
        # 8192 x 8192 x 4 = 2**28 inputs, but 9 * 4 columns per position: 2.4e9 columns
        ("conv", (8192, 8192, 4), dict(F=4, Rx=3, Ry=3, S=1, Px=1, Py=1), False),
        ("depthwise", (8192, 8192, 4), dict(Rx=3, Ry=3, S=1, Px=1, Py=1), True),
        ("maxpool", (16384, 16384, 8), dict(Rx=2, Ry=2, S=2, Px=0, Py=0), False),  # 2**31
    ],
)
def test_fused_kernels_leave_layers_beyond_32_bit_image_indices_to_the_shared_code(
    type_name, shape, params, fits
):
    layer = make_layer(type_name, [shape], **params)
    assert cuda_kernels.fits_int32(layer) is fits
