"""The canonical table set (standard.md §5 ruling): the widely used networks at full size.

Its tables are written by ``tools/canonical_tables.py``; their MAC counts are held against
the published ones in docs/tables.md (tests/test_readme.py). Verifying the NumPy backend on the
full-size networks is slow on a small machine, so the default run verifies each network
but В once at B = 1 (``ONCE``); ``GOST_CANONICAL=all`` runs every network in both modes at
B = 1 and 2 under both weight readings where they hold (docs/tables.md, "The canonical set").
"""

import importlib.util
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from gost_helpers import HALF, REPOSITORY, swept

from pytest_gostcnn import executor
from pytest_gostcnn.backends.numpy import NumpyBackend
from pytest_gostcnn.conformance.verification import CORRECT, REFERENCE_GRADE, verify_network
from pytest_gostcnn.model.data import draw_input, draw_weights
from pytest_gostcnn.model.network import LATIN, TableError
from pytest_gostcnn.model.table_files import (
    default_tables_dir,
    load_networks,
    table_set,
    table_set_dir,
)
from pytest_gostcnn.reference import ReferenceKernels

ALL = os.environ.get("GOST_CANONICAL") == "all"
opt_in = pytest.mark.skipif(
    not ALL, reason="the full canonical matrix is opt-in: GOST_CANONICAL=all (minutes)"
)


@pytest.fixture(scope="module")
def canonical():
    return load_networks("canonical")


def _generator():
    path = REPOSITORY / "tools" / "canonical_tables.py"
    spec = importlib.util.spec_from_file_location("canonical_tables", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


def test_the_shipped_tables_are_what_the_generator_writes():
    # Regenerate with `python tools/canonical_tables.py` after changing the script; a table
    # edited by hand instead fails here.
    for name, text in _generator().tables().items():
        shipped = (default_tables_dir() / "canonical" / name).read_text(encoding="utf-8")
        assert shipped == text, f"{name}: rerun python tools/canonical_tables.py"


def test_the_set_holds_the_six_networks_in_the_standards_order(canonical):
    assert list(canonical) == list(LATIN.values())
    for network in canonical.values():
        assert network.provenance == "canonical"
        assert network.input_shape == (224, 224, 3)
        assert network.output_shape == (1, 1, 1000)


# Layers with weights, counted from the papers' architecture tables.
WEIGHT_LAYERS = {
    "M": {"conv": 1 + 13, "depthwise": 13, "fc": 1},  # stem, 13 separable blocks, classifier
    "G": {"conv": 1 + 2 + 9 * 6, "fc": 1},  # stem 7x7, 1x1 + 3x3, six per inception module
    "V": {"conv": 13, "fc": 3},  # configuration D
    "S": {"conv": 1 + 8 * 3 + 1},  # stem, squeeze and two expands per fire module, classifier
    "R": {"conv": 1 + 16 * 3 + 4, "fc": 1},  # stem, 16 bottlenecks, 4 projection shortcuts
    # stem; each of the 16 units' branch: 1x1, depthwise, 1x1; each of the 3 downsampling
    # units' other half: depthwise, 1x1; conv5
    "Sh": {"conv": 1 + 16 * 2 + 3 + 1, "depthwise": 16 + 3, "fc": 1},
}


@pytest.mark.parametrize("latin", list(WEIGHT_LAYERS))
def test_each_network_has_its_papers_layers_with_weights(canonical, latin):
    counted = {}
    for layer in canonical[latin].weight_layers:
        counted[layer.type.name] = counted.get(layer.type.name, 0) + 1
    assert counted == WEIGHT_LAYERS[latin]


def test_R_adds_every_bottleneck_to_its_shortcut(canonical):
    adds = [layer for layer in canonical["R"].layers if layer.type.name == "eltwise"]
    assert len(adds) == 16  # 3 + 4 + 6 + 3 blocks


def test_R_strides_on_the_3x3_convolution_as_v1_5_does(canonical):
    kernels = sorted(
        layer.params["Rx"]
        for layer in canonical["R"].layers
        if layer.type.name == "conv" and layer.params["S"] == 2
    )
    # the 7x7 stem, then in each of stages 2-4 the 3x3 and the 1x1 projection shortcut
    assert kernels == [1, 1, 1, 3, 3, 3, 7]


def test_G_has_the_papers_5x5_branch_in_all_nine_modules(canonical):
    fives = [layer for layer in canonical["G"].layers if layer.params.get("Rx") == 5]
    assert len(fives) == 9


def test_Sh_splits_channels_in_half_and_shuffles_in_two_groups(canonical):
    network = canonical["Sh"]
    for layer in network.layers:
        if layer.type.name == "split":
            assert layer.params["L1"] * 2 == layer.in_shapes[0][2]
        if layer.type.name == "shuffle":
            assert layer.params["G"] == 2
    assert sum(layer.type.name == "shuffle" for layer in network.layers) == 16


def test_a_set_name_selects_a_shipped_set_and_anything_else_a_directory(tmp_path):
    assert table_set(None) == "reconstructions"
    assert table_set("canonical") == "canonical"
    assert table_set("reconstructions") == "reconstructions"
    assert table_set("./canonical") == "user"
    assert table_set(Path("canonical")) == "user"  # a Path is always a directory
    assert table_set_dir("canonical") == default_tables_dir() / "canonical"
    assert load_networks("reconstructions").keys() == load_networks().keys()


def test_a_directory_named_like_a_set_loads_when_given_as_a_path(tmp_path, monkeypatch):
    own = tmp_path / "canonical"
    own.mkdir()
    shipped = default_tables_dir() / "canonical" / "S.yaml"
    (own / "S.yaml").write_text(shipped.read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert list(load_networks("./canonical")) == ["S"]
    assert list(load_networks("canonical")) == list(LATIN.values())


def test_an_unknown_set_name_is_refused_with_the_known_ones():
    with pytest.raises(TableError, match="unknown table set 'analogs'.*reconstructions, canonical"):
        table_set_dir("analogs")


def test_full_range_weights_carry_R_past_float32(canonical):
    # Why the scaled reading is the one that verifies Р (docs/tables.md): drawn from the whole
    # of U(-1, 1), ResNet-50's values grow past float32's largest finite value.
    network = canonical["R"]
    rng = np.random.default_rng(0)
    weights = draw_weights(network, rng, "full-range")
    output = executor.infer(network, ReferenceKernels(), weights, draw_input(network, 1, rng))
    assert np.abs(output).max() > np.finfo(np.float32).max


def _verified(network, mode: str, batch: int, weights: str = "scaled") -> None:
    result = verify_network(NumpyBackend("float32"), network, mode, batch, seed=11, weights=weights)
    assert result.verdict in (CORRECT, REFERENCE_GRADE), result.first_failure
    assert result.worst.ratio <= HALF, result.worst.describe()


# One verification per network by default, in training, but for В (VGG-16): its float64
# training reference and error model take minutes on two cores, and even its inference
# 20 s, a fifteenth of the whole run, so В is verified in the opt-in matrix only; Р
# (ResNet-50) in training, 13 s, in inference here and in training under GOST_SWEEP=all.
ONCE = [
    ("M", "training"),
    ("G", "training"),
    ("S", "training"),
    ("R", "inference"),
    swept("R", "training"),
    ("Sh", "training"),
]


@pytest.mark.parametrize(("latin", "mode"), ONCE)
def test_numpy_backend_verifies_on_the_canonical_network(canonical, latin, mode):
    _verified(canonical[latin], mode, batch=1)


@pytest.mark.slow
@opt_in
@pytest.mark.parametrize("batch", [1, 2])
@pytest.mark.parametrize("mode", ["inference", "training"])
@pytest.mark.parametrize("latin", list(LATIN.values()))
def test_numpy_backend_verifies_every_canonical_case_with_scaled_weights(
    canonical, latin, mode, batch
):
    _verified(canonical[latin], mode, batch)


@pytest.mark.slow
@opt_in
@pytest.mark.parametrize("batch", [1, 2])
@pytest.mark.parametrize("mode", ["inference", "training"])
@pytest.mark.parametrize("latin", ["M", "G", "V", "S", "Sh"])  # not Р: past float32 above
def test_numpy_backend_verifies_the_canonical_networks_with_full_range_weights(
    canonical, latin, mode, batch
):
    _verified(canonical[latin], mode, batch, weights="full-range")
