"""The float64 reference on another array library (standard.md §6, "Where the reference
runs"): PyTorch on the CPU agrees with NumPy, and a library that cannot run or disagrees
stops the run in one line before any verdict."""

import sys

import numpy as np
import pytest
from gost_helpers import directory, suite

from pytest_gostcnn.backends.torch import backend as torch_backend
from pytest_gostcnn.conformance import reference_check
from pytest_gostcnn.conformance.harness import model_of
from pytest_gostcnn.model.layers import make_layer
from pytest_gostcnn.reference import MODULES
from pytest_gostcnn.reference.library import (
    NUMPY,
    LibraryError,
    ReferenceLibrary,
    parse,
    to_numpy,
)
from pytest_gostcnn.run.option_parsers import reference_library

TORCH = ReferenceLibrary("torch", "cpu")
needs_torch = pytest.mark.skipif(
    torch_backend.torch is None, reason=f"{torch_backend.INSTALL_HINT} (CI installs it)"
)


@pytest.mark.parametrize(
    ("text", "library"),
    [
        ("numpy", NUMPY),
        ("torch", TORCH),
        ("torch:cuda:0", ReferenceLibrary("torch", "cuda:0")),
        ("cupy", ReferenceLibrary("cupy", "cuda:0")),
        ("cupy:cuda:1", ReferenceLibrary("cupy", "cuda:1")),
    ],
)
def test_the_option_names_a_library_and_its_device(text, library):
    assert reference_library("--gost-reference", text) == library
    assert str(library) == text


def test_the_option_refuses_a_library_it_does_not_know():
    with pytest.raises(ValueError, match=r"--gost-reference=jax: not a reference library"):
        reference_library("--gost-reference", "jax")


def test_the_option_refuses_numpy_on_a_device_other_than_the_cpu():
    # Accepted, it ran on the CPU while the report named cuda:0.
    with pytest.raises(ValueError, match=r"--gost-reference=numpy:cuda:0: NumPy runs on the CPU"):
        reference_library("--gost-reference", "numpy:cuda:0")
    assert reference_library("--gost-reference", "numpy:cpu") == ReferenceLibrary()


@needs_torch
def test_the_error_model_on_torch_gives_numpys_values_and_variances_to_float64_rounding():
    layer = make_layer("conv", [(6, 5, 3)], Rx=3, Ry=3, S=1, Px=1, Py=1, F=4)
    rng = np.random.default_rng(0)
    image = rng.uniform(-127, 128, size=(2, 6, 5, 3))
    weights = {k: rng.uniform(-1, 1, size=s) for k, s in layer.weight_shapes.items()}
    out = {}
    for library in (NUMPY, TORCH):
        model, _ = model_of("float32", library)
        bound = {k: model.bound(a) for k, a in weights.items()}
        out[library.name] = model.forward(layer, [model.bound(image)], bound)[0]
    assert isinstance(out["torch"].value, torch_backend.torch.Tensor)
    for field in ("value", "var"):
        expected, got = (
            to_numpy(getattr(out["numpy"], field)),
            to_numpy(getattr(out["torch"], field)),
        )
        assert reference_check.relative_difference(expected, got) < 1e-14


@needs_torch
def test_torch_on_the_cpu_agrees_with_numpy_on_every_fixed_item():
    found = reference_check.checked(TORCH)
    # every small layer case and one network iteration; each a value and a variance per array
    assert found.items == 33 and found.arrays > 400
    assert found.agrees and found.max_relative_difference < 1e-13


def test_numpy_is_the_reference_itself_and_is_not_checked():
    assert reference_check.checked(NUMPY) is None


class _Perturbed:
    """The conv module with its forward's float64 result off by 1e-9 on a library other
    than NumPy: a kernel a library computes wrongly, by less than any СКОП would show."""

    def __init__(self, module):
        self.module = module

    def __getattr__(self, name):
        return getattr(self.module, name)

    def forward(self, layer, inputs, weights):
        out = self.module.forward(layer, inputs, weights)
        return out if isinstance(out[0], np.ndarray) else [a * (1 + 1e-9) for a in out]


@needs_torch
def test_a_library_whose_one_kernel_is_perturbed_is_refused_in_one_line(monkeypatch):
    monkeypatch.setitem(MODULES, "conv", _Perturbed(MODULES["conv"]))
    with pytest.raises(LibraryError) as refused:
        reference_check.checked(TORCH)
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith("the reference library torch on cpu disagrees with NumPy's float64")
    assert "(tolerance 1e-12); nothing is judged by an unchecked reference" in message
    assert " at conv " in message or " at Sh training" in message


def test_a_library_that_is_not_installed_is_named_with_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy fails
    with pytest.raises(LibraryError, match=r"^the reference library cupy is not installed .*pip"):
        reference_check.checked(parse("cupy"))


@needs_torch
def test_a_device_the_library_does_not_have_is_named():
    with pytest.raises(LibraryError, match=r"^the reference library torch has no device 'nope'"):
        reference_check.checked(parse("torch:nope"))


@needs_torch
def test_a_run_on_a_missing_device_stops_before_any_item_in_one_line(tmp_path):
    run = suite(directory(tmp_path), "--gost-backend=numpy", "--gost-reference=torch:nope")
    assert run.returncode == 4 and run.report is None
    lines = [line for line in run.stderr.splitlines() if line.startswith("ERROR:")]
    assert lines == [
        line
        for line in lines
        if line.startswith("ERROR: --gost-reference=torch:nope: the reference library torch")
    ]
    assert len(lines) == 1


@needs_torch
def test_a_run_on_torch_gives_numpys_verdicts_and_its_report_says_where_the_reference_ran(
    tmp_path,
):
    # The network item and the benchmark's checks; the layer steps' reference on torch is
    # every layer module's, held to NumPy's above.
    common = ("--gost-backend=numpy", "--gost-networks=Sh", "--gost-mode=training")
    common += ("-k", "Sh and not test_layer")
    path = directory(tmp_path)
    runs = {text: suite(path, *common, f"--gost-reference={text}") for text in ("numpy", "torch")}
    numpy_run, torch_run = runs["numpy"].report, runs["torch"].report
    assert numpy_run["reference"] == {
        "library": "numpy",
        "version": np.__version__,
        "device": "cpu",
        "agreement": None,
    }
    assert torch_run["reference"]["library"] == "torch"
    assert torch_run["reference"]["agreement"]["max_relative_difference"] < 1e-12
    by_subject = [
        {v["subject"]: v for v in run["verification"]["networks"]} for run in (numpy_run, torch_run)
    ]
    assert by_subject[0] and by_subject[0].keys() == by_subject[1].keys()
    for subject, verified in by_subject[0].items():
        other = by_subject[1][subject]
        assert verified["verdict"] == other["verdict"]
        for mine, theirs in zip(verified["checks"], other["checks"], strict=True):
            # СКО is of differences about 1e-7 of the values (float32): the reference's
            # float64 rounding, 1e-15 of them, is about 1e-8 of it.
            assert mine["rmse"] == pytest.approx(theirs["rmse"], rel=1e-6)
            assert mine["admissible_rmse"] == pytest.approx(theirs["admissible_rmse"], rel=1e-9)
