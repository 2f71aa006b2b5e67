"""The float32 NumPy backend passes section 8 on every shipped network and layer case.

Not just below СКОП: at most half of it, so a correct float32 implementation sits well
inside the threshold and the verdict does not hinge on luck.
"""

import numpy as np
import pytest
from gost_helpers import HALF, swept

from pytest_gostcnn.backends.numpy import NumpyBackend
from pytest_gostcnn.backends.numpy.kernels._shared import Geometry
from pytest_gostcnn.backends.numpy.kernels.conv import conv_forward, conv_gradient
from pytest_gostcnn.backends.numpy.kernels.im2col import (
    _blocked_gradient,
    _im2col_chunks,
    _im2col_gemm,
)
from pytest_gostcnn.backends.numpy.kernels.transposed_product import _transposed_product
from pytest_gostcnn.backends.numpy.workspace import Workspace
from pytest_gostcnn.conformance.layer_cases import layer_cases
from pytest_gostcnn.conformance.verification import (
    CORRECT,
    REFERENCE_GRADE,
    layer_steps,
    verify_layer,
    verify_network,
)
from pytest_gostcnn.machine.threads import blas
from pytest_gostcnn.model.data import draw_input, draw_out_residual, draw_weights
from pytest_gostcnn.model.layers import make_layer
from pytest_gostcnn.model.network import LATIN

# B = 8 on Ш (Sh) in both modes and on С (S) in inference (the batch's chunking is the same
# code for all).
AT_8 = {("Sh", "inference"), ("Sh", "training"), ("S", "inference")}


def _in_ci(latin: str, mode: str, batch: int) -> bool:
    """CI: every network in both modes at the suite's default B = 2; at B = 1 in inference,
    and in training on Ш and Р (R); B = 8 as ``AT_8``. GOST_SWEEP=all runs every network at
    B = 1, 2 and 8 in both modes (about two minutes of a 2-core machine)."""
    if batch == 1:
        return mode == "inference" or latin in ("Sh", "R")
    return batch == 2 or (latin, mode) in AT_8


def _cases() -> list:
    return [
        swept(latin, mode, batch, in_ci=_in_ci(latin, mode, batch))
        for latin in LATIN.values()
        for mode in ("inference", "training")
        for batch in (1, 2, 8)
    ]


@pytest.mark.parametrize(("latin", "mode", "batch"), _cases())
def test_numpy_backend_is_correct_within_half_the_threshold(shipped_networks, latin, mode, batch):
    result = verify_network(NumpyBackend("float32"), shipped_networks[latin], mode, batch, seed=11)
    assert result.verdict in (CORRECT, REFERENCE_GRADE), result.first_failure
    assert result.worst.ratio <= HALF, result.worst.describe()


@pytest.mark.parametrize("type_name", ["relu", "maxpool", "concat", "split", "shuffle"])
def test_layers_that_only_select_values_are_reference_grade(type_name):
    # The draws are rounded to float32 before both implementations see them (the same
    # values: docs/standard.md §6), so a forward step that only copies or selects values
    # reproduces the float64 reference exactly: every СКО is 0.
    for case in (c for c in layer_cases() if c.layer.type.name == type_name):
        result = verify_layer(
            NumpyBackend("float32"),
            case.layer,
            "forward",
            2,
            seed=3,
            subject=case.tag,
            draw_input=case.draw_input,
        )
        assert result.verdict == REFERENCE_GRADE, (case.tag, result.checks)


def _threaded_backend(blocked: bool = False) -> NumpyBackend:
    """Two worker threads on every pass however small; every im2col in blocks of one output
    row (``blocked``) or in chunks of one output row, the GEMM split over the threads."""
    backend = NumpyBackend("float32", threads=2)
    backend.workspace.parallel_min = 0
    backend.workspace.parallel_min_macs = 0  # every GEMM split over the threads too
    if blocked:
        backend.workspace.block_bytes = 1
    else:
        backend.workspace.blocked_weights_bytes = 0
        backend.workspace.workspace_bytes = 1
    return backend


# CI: the networks of the compiled kernels (depthwise, shuffle: М, С, Ш) and of the residual
# sums (Р) in blocks, Р and Ш in chunks too; GOST_SWEEP=all adds the rest, whose layer types
# the layer cases below cover with threads, blocks and chunks too.
@pytest.mark.parametrize(
    ("latin", "im2col"),
    [
        swept(
            latin,
            im2col,
            in_ci=latin in {"blocks": ("M", "S", "R", "Sh"), "chunks": ("R", "Sh")}[im2col],
        )
        for latin in LATIN.values()
        for im2col in ("blocks", "chunks")
    ],
)
def test_threads_blocks_and_chunks_keep_the_backend_correct(shipped_networks, latin, im2col):
    # Threads, blocks and chunks change only the order of the work (and of float32 sums), so
    # the verdict and the margin are those of the plain run, on whatever shape a pass meets.
    backend = _threaded_backend(blocked=im2col == "blocks")
    result = verify_network(backend, shipped_networks[latin], "training", 2, seed=11)
    assert result.verdict in (CORRECT, REFERENCE_GRADE), result.first_failure
    assert result.worst.ratio <= HALF, result.worst.describe()


@pytest.mark.parametrize(
    "make_backend",
    [lambda: NumpyBackend("float32"), lambda: _threaded_backend(True), _threaded_backend],
    ids=["default", "threads-and-blocks", "threads-and-chunks"],
)
@pytest.mark.parametrize("case", layer_cases(), ids=lambda c: f"{c.layer.type.name}-{c.tag}")
def test_numpy_backend_passes_every_layer_step(case, make_backend):
    for step in layer_steps(case.layer):
        result = verify_layer(
            make_backend(),
            case.layer,
            step,
            3,
            seed=11,
            subject=step,
            draw_input=case.draw_input,
        )
        assert result.verdict in (CORRECT, REFERENCE_GRADE), (step, result.first_failure)
        assert result.worst.ratio <= HALF, (step, result.worst.describe())


# Strided convolutions on few channels, whose IN_D goes through the channels-first
# col2im over S*S phase maps: strides 2 and 3, Rx != Ry, Px != Py, a padding as wide as
# the stride, and sizes that the stride does not divide.
PHASE_LAYERS = [
    make_layer("conv", [(16, 15, 3)], F=8, Rx=7, Ry=7, S=2, Px=3, Py=3),
    make_layer("conv", [(17, 13, 2)], F=5, Rx=5, Ry=3, S=3, Px=2, Py=1),
    make_layer("conv", [(11, 14, 1)], F=4, Rx=2, Ry=4, S=2, Px=0, Py=2),
]


@pytest.mark.parametrize("make_backend", [lambda: NumpyBackend("float32"), _threaded_backend])
@pytest.mark.parametrize("layer", PHASE_LAYERS, ids=lambda layer: str(layer.in_shapes[0]))
def test_strided_input_residual_over_phase_maps_passes(layer, make_backend):
    assert layer.out_shapes[0][1] > layer.in_shapes[0][2]  # the channels-first path
    result = verify_layer(make_backend(), layer, "backward", 3, seed=11, subject="backward")
    assert result.verdict in (CORRECT, REFERENCE_GRADE), result.first_failure
    assert result.worst.ratio <= HALF, result.worst.describe()


# Strides 1 and 2, padded, unpadded and cropped (IN_D's adjoint of a padding wider than
# the window), maps of more and of fewer rows than a block, batches that do and do not
# split evenly over the threads.
IM2COL_CASES = [
    ((3, 10, 12, 4), Geometry((10, 12), (10, 12), (3, 3), 1, (1, 1)), 6),
    ((1, 9, 7, 3), Geometry((9, 7), (5, 4), (3, 3), 2, (1, 1)), 5),
    ((2, 13, 13, 8), Geometry((13, 13), (7, 7), (7, 7), 2, (3, 3)), 8),
    ((5, 8, 8, 16), Geometry((8, 8), (6, 6), (3, 3), 1, (0, 0)), 4),
    ((4, 10, 9, 2), Geometry((10, 9), (6, 5), (3, 3), 1, (-1, -1)), 3),
]


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("rows", [1, 2, 3, None], ids=["1", "2", "3", "all"])
@pytest.mark.parametrize(("shape", "geometry", "features"), IM2COL_CASES)
def test_im2col_in_blocks_is_the_chunked_product(shape, geometry, features, rows, threads):
    # Blocks of 1 to 3 output rows (a last one shorter) or whole images: the forward
    # product is the chunked one within float32 rounding (every output row the same GEMM
    # row, but BLAS may pick another kernel by a product's row count: with NumPy 2.4.6's
    # OpenBLAS 0.3.31 (Haswell kernels) the 7x7 window's 393-term sums differ by up to
    # 2.5e-5 on values near 20), the weight gradient the same sum in another order.
    rng = np.random.default_rng(2)
    source = rng.standard_normal(shape, dtype=np.float32)
    residual = rng.standard_normal((shape[0], *geometry.out_xy, features), dtype=np.float32)
    depth = geometry.window[0] * geometry.window[1] * shape[3]
    row_bytes = geometry.out_xy[1] * (depth + 1) * 4
    block_bytes = row_bytes * rows + 1 if rows else 1 << 20
    chunked = Workspace(threads, parallel_min=0, parallel_min_macs=0, blocked_weights_bytes=0)
    blocked = Workspace(threads, parallel_min=0, parallel_min_macs=0, block_bytes=block_bytes)
    for with_ones in (True, False):
        matrix = rng.standard_normal((depth + with_ones, features), dtype=np.float32)
        expected = np.empty_like(residual)
        got = np.empty_like(residual)
        _im2col_gemm(chunked, source, geometry, matrix, expected, with_ones)
        _im2col_gemm(blocked, source, geometry, matrix, got, with_ones)
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    whole = np.zeros((depth + 1, features))
    for c0, n, out_rows, cols in _im2col_chunks(chunked, source, geometry, True):
        whole += cols.T.astype(np.float64) @ residual[c0 : c0 + n, out_rows].reshape(-1, features)
    gradient = _blocked_gradient(blocked, source, geometry, residual, depth + 1)
    np.testing.assert_allclose(gradient, whole, rtol=1e-5, atol=1e-5)


# Р's projections: a 1x1 window of stride 2 or 3, unpadded, on maps whose last rows and
# columns it does and does not read (9 rows at S = 3: rows 0, 3, 6 only).
SUBSAMPLING_LAYERS = [
    make_layer("conv", [(8, 6, 4)], F=5, Rx=1, Ry=1, S=2, Px=0, Py=0),
    make_layer("conv", [(9, 7, 3)], F=6, Rx=1, Ry=1, S=2, Px=0, Py=0),
    make_layer("conv", [(9, 8, 4)], F=3, Rx=1, Ry=1, S=3, Px=0, Py=0),
]


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize(
    "layer", SUBSAMPLING_LAYERS, ids=lambda layer: f"{layer.in_shapes[0]}-S{layer.params['S']}"
)
def test_a_strided_1x1_window_is_a_gemm_over_the_map_subsampled(layer, threads):
    # FILTERS times every S-th row and column of IN, plus BIASES; its gradient the same
    # rows' product with OUT_D: as the float64 sums over those positions give them.
    rng = np.random.default_rng(5)
    backend = NumpyBackend("float32", threads=threads)
    backend.workspace.parallel_min = backend.workspace.parallel_min_macs = 0
    s, features = layer.params["S"], layer.params["F"]
    x = rng.standard_normal((3, *layer.in_shapes[0]), dtype=np.float32)
    residual = rng.standard_normal((3, *layer.out_shapes[0]), dtype=np.float32)
    filters = rng.standard_normal((1, 1, x.shape[3], features), dtype=np.float32)
    biases = rng.standard_normal(features, dtype=np.float32)
    read = x[:, ::s, ::s].astype(np.float64)
    assert read.shape[1:3] == layer.out_shapes[0][:2]
    [out] = conv_forward(backend.workspace, layer, [x], {"filters": filters, "biases": biases})
    np.testing.assert_allclose(out, read @ filters[0, 0] + biases, rtol=1e-5, atol=1e-5)
    assert ("subsampled", np.dtype(np.float32)) in backend.workspace._buffers
    other = rng.standard_normal(x.shape, dtype=np.float32)  # the gradient subsamples anew
    conv_forward(backend.workspace, layer, [other], {"filters": filters, "biases": biases})
    grads = conv_gradient(backend.workspace, layer, [x], [residual])
    expected = np.einsum("bxyl,bxyf->lf", read, residual)
    np.testing.assert_allclose(grads["filters"][0, 0], expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(grads["biases"], residual.sum(axis=(0, 1, 2)), rtol=1e-5)
    for step in ("forward", "gradient"):
        result = verify_layer(_threaded_backend(), layer, step, 2, seed=3, subject=step)
        assert result.verdict in (CORRECT, REFERENCE_GRADE), result.first_failure


# Strided windows that are not a subsampling: a padded 1x1 (its border reads zeros) and a
# 1x3 one; shipped tables have neither, so only this test would see them taken for one.
@pytest.mark.parametrize(
    "layer",
    [
        make_layer("conv", [(7, 7, 3)], F=4, Rx=1, Ry=1, S=3, Px=1, Py=1),
        make_layer("conv", [(8, 9, 3)], F=4, Rx=1, Ry=3, S=2, Px=0, Py=0),
    ],
    ids=["1x1-padded", "1x3"],
)
def test_a_strided_window_that_is_not_a_subsampling_keeps_the_im2col(layer):
    for step in ("forward", "gradient"):
        backend = _threaded_backend()
        result = verify_layer(backend, layer, step, 2, seed=3, subject=step)
        assert result.verdict in (CORRECT, REFERENCE_GRADE), result.first_failure
        assert ("subsampled", np.dtype(np.float32)) not in backend.workspace._buffers


@pytest.mark.parametrize(("m", "k", "n"), [(37, 5, 3), (2, 7, 41), (1, 1, 1)])
def test_a_gemm_split_over_the_threads_is_the_whole_product(m, k, n):
    # By rows where the product is taller, by columns where it is wider: the same numbers.
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    workspace = Workspace(threads=3, parallel_min_macs=0)
    np.testing.assert_allclose(workspace.matmul(a, b), a @ b, rtol=1e-12)
    out = np.empty((m, n)).T  # a strided result, as a kernel's view of its output is
    assert workspace.matmul(b.T, a.T, out) is out
    np.testing.assert_allclose(out, (a @ b).T, rtol=1e-12)


def test_the_backend_runs_blas_on_one_thread_so_its_pool_never_oversubscribes_the_cell():
    NumpyBackend("float32", threads=2)
    assert [library["threads"] for library in blas()] == [1] * len(blas())
    assert blas(), "NumPy loaded no BLAS threadpoolctl knows"


@pytest.mark.parametrize(("n", "k", "f"), [(101, 7, 3), (101, 3, 7), (2, 5, 4)])
def test_a_weight_gradient_split_along_its_reduction_is_the_whole_product(n, k, f):
    # Small products are summed from per-thread partials over slices of N, in both of the
    # orientations _transposed_product picks (K >= F and K < F).
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((n, k)), rng.standard_normal((n, f))
    workspace = Workspace(threads=3, parallel_min_macs=0)
    np.testing.assert_allclose(_transposed_product(workspace, a, b), a.T @ b, rtol=1e-12)
    out = np.empty((k, f))
    assert _transposed_product(workspace, a, b, out) is out
    np.testing.assert_allclose(out, a.T @ b, rtol=1e-12)


# Depthwise convolution and max pooling run as compiled loops over rows of the map, their
# backward steps as gathers over IN_D: strides 2 and 3, Rx != Ry, Px != Py, sizes the stride
# does not divide, a window wider than its padding on one side only.
WINDOW_LAYERS = [
    make_layer("depthwise", [(11, 9, 5)], Rx=3, Ry=2, S=2, Px=1, Py=0),
    make_layer("depthwise", [(13, 10, 3)], Rx=5, Ry=3, S=3, Px=2, Py=1),
    make_layer("maxpool", [(11, 9, 5)], Rx=3, Ry=2, S=2, Px=1, Py=0),
    make_layer("maxpool", [(13, 10, 3)], Rx=3, Ry=3, S=3, Px=1, Py=1),
]


@pytest.mark.parametrize("make_backend", [lambda: NumpyBackend("float32"), _threaded_backend])
@pytest.mark.parametrize(
    "layer", WINDOW_LAYERS, ids=lambda layer: f"{layer.type.name}-{layer.in_shapes[0]}"
)
def test_compiled_window_layers_pass_every_step_on_awkward_geometry(layer, make_backend):
    for step in layer_steps(layer):
        result = verify_layer(make_backend(), layer, step, 3, seed=5, subject=step)
        assert result.verdict in (CORRECT, REFERENCE_GRADE), (step, result.first_failure)
        assert result.worst.ratio <= HALF, (step, result.worst.describe())


@pytest.mark.parametrize("type_name", ["depthwise", "maxpool", "relu"])
def test_a_residual_that_is_a_view_gives_what_its_copy_gives(type_name):
    # concat's backward step hands on views of OUT_D (channel_parts): the compiled loops
    # take C-ordered arrays, so a view must be read as the map it is, not as its memory.
    layer = {
        "depthwise": make_layer("depthwise", [(6, 5, 4)], Rx=3, Ry=3, S=1, Px=1, Py=1),
        "maxpool": make_layer("maxpool", [(6, 5, 4)], Rx=2, Ry=2, S=2, Px=0, Py=0),
        "relu": make_layer("relu", [(6, 5, 4)]),
    }[type_name]
    backend = NumpyBackend("float32", threads=2)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, *layer.in_shapes[0])).astype(np.float32)
    weights = {
        name: rng.standard_normal(shape).astype(np.float32)
        for name, shape in layer.weight_shapes.items()
    }
    outputs = backend.forward(layer, [x], weights)
    wide = rng.standard_normal((*outputs[0].shape[:3], 7)).astype(np.float32)
    view = wide[..., 2 : 2 + outputs[0].shape[3]]
    assert not view.flags.c_contiguous
    copy = backend.backward(layer, [x], outputs, [view.copy()], weights)[0].copy()
    np.testing.assert_array_equal(backend.backward(layer, [x], outputs, [view], weights)[0], copy)


def test_relu_gives_zero_for_a_nan_input_as_the_standard_writes_it():
    # docs/standard.md §4: IN > 0 ? IN : 0, so NaN (not > 0) gives 0, and so does its IN_D.
    layer = make_layer("relu", [(1, 2, 3)])
    x = np.array([[[[np.nan, -1.0, 2.0], [0.0, np.inf, -np.inf]]]], dtype=np.float32)
    backend = NumpyBackend("float32")
    out = backend.forward(layer, [x], {})[0]
    np.testing.assert_array_equal(out, [[[[0, 0, 2], [0, np.inf, 0]]]])
    residual = np.ones_like(x)
    in_residual = backend.backward(layer, [x], [out], [residual], {})[0]
    np.testing.assert_array_equal(in_residual, [[[[0, 0, 1], [0, 1, 0]]]])


def test_another_networks_weights_let_go_of_the_result_arrays_kept_for_the_last(
    shipped_networks,
):
    # A session verifies and times the six networks one after another in one backend: the
    # arrays kept for one network's shapes went on growing with each (at B = 64 the six
    # analogs' items peaked at 7.95 GB in one process, 2.91 GB each alone).
    backend = NumpyBackend("float32")
    rng = np.random.default_rng(0)

    def iteration(network):
        weights = backend.load_weights(network, draw_weights(network, rng))
        image, residual = draw_input(network, 2, rng), draw_out_residual(network, 2, rng)
        backend.train(network, weights, backend.to_device(image), backend.to_device(residual))
        return backend.workspace._results_bytes

    kept = iteration(shipped_networks["Sh"])
    assert kept > 0
    assert iteration(shipped_networks["Sh"]) == kept  # the same network: every array reused
    backend.load_weights(shipped_networks["R"], draw_weights(shipped_networks["R"], rng))
    assert backend.workspace._results_bytes == 0
