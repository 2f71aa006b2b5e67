"""The suite's own float64 work at the machine's speed, and no other result for it: the
reference's products split over the cell's cores sum as one product does, and a segment's
checks replay it once (docs/benchmarking.md, "Checked rounds")."""

import subprocess
import sys
import warnings

import numpy as np
import pytest

from pytest_gostcnn.conformance.harness import model_of
from pytest_gostcnn.machine import pool
from pytest_gostcnn.machine.threads import one_blas_thread
from pytest_gostcnn.model.layers import make_layer
from pytest_gostcnn.reference import _window, conv, depthwise, fc

# Layers whose products the pool splits in three (each part at least PARALLEL_MIN_MACS): a
# 3x3 layer, a strided one, a 1x1 one on a map shorter than the threads (split by the batch).
CONVOLUTIONS = [
    dict(shape=(48, 48, 64), F=64, Rx=3, Ry=3, S=1, Px=1, Py=1, batch=2),
    dict(shape=(28, 28, 64), F=128, Rx=3, Ry=3, S=2, Px=1, Py=1, batch=8),
    dict(shape=(2, 2, 512), F=1024, Rx=1, Ry=1, S=1, Px=0, Py=0, batch=8),
]


def _case(case: dict):
    """The layer of ``case`` and its arguments: an input, weights and a residual."""
    case = dict(case)
    shape, batch = case.pop("shape"), case.pop("batch")
    layer = make_layer("conv", [shape], **case)
    rng = np.random.default_rng(7)
    x = rng.standard_normal((batch, *shape))
    weights = {name: rng.standard_normal(s) for name, s in layer.weight_shapes.items()}
    r = rng.standard_normal((batch, *layer.out_shapes[0]))
    return layer, (x, weights, r)


def _steps(layer, x, weights, r) -> list[np.ndarray]:
    grads = conv.gradient(layer, [x], [r])
    return [
        conv.forward(layer, [x], weights)[0],
        conv.backward(layer, [x], [None], [r], weights)[0],
        grads["filters"],
        grads["biases"],
    ]


@pytest.mark.parametrize("case", CONVOLUTIONS, ids=lambda c: f"{c['shape']}-F{c['F']}-S{c['S']}")
def test_a_product_split_over_the_cores_gives_the_one_threads_sums_bit_for_bit(case, monkeypatch):
    layer, arguments = _case(case)
    results = {}
    with one_blas_thread():
        for threads in (1, 2, 3):
            monkeypatch.setattr(pool, "threads", lambda threads=threads: threads)
            results[threads] = _steps(layer, *arguments)
    for threads in (2, 3):
        for one, split in zip(results[1], results[threads], strict=True):
            np.testing.assert_array_equal(split, one)


@pytest.mark.parametrize("case", CONVOLUTIONS, ids=lambda c: f"{c['shape']}-F{c['F']}-S{c['S']}")
def test_a_product_cut_in_small_slabs_gives_the_whole_slabs_sums_bit_for_bit(case, monkeypatch):
    # A row of window offsets side by side is copied a slab at a time (SLAB_ELEMENTS): a
    # layer's results must not depend on the slab, down to one row of the map at a time for
    # the products and the narrowest column cut for the weight gradient.
    layer, arguments = _case(case)
    results = {}
    monkeypatch.setattr(pool, "threads", lambda: 2)
    with one_blas_thread():
        for elements in (1 << 40, 1):
            monkeypatch.setattr(_window, "SLAB_ELEMENTS", elements)
            results[elements] = _steps(layer, *arguments)
    for whole, cut in zip(results[1 << 40], results[1], strict=True):
        np.testing.assert_array_equal(cut, whole)


def test_a_product_split_wrongly_would_be_caught(monkeypatch):
    # The test above earns its keep only if a split that drops a slab fails it.
    layer = make_layer("conv", [(48, 48, 64)], F=64, Rx=3, Ry=3, S=1, Px=1, Py=1)
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 48, 48, 64))
    weights = {name: rng.standard_normal(s) for name, s in layer.weight_shapes.items()}
    whole = conv.forward(layer, [x], weights)[0]
    monkeypatch.setattr(pool, "threads", lambda: 2)
    monkeypatch.setattr(
        pool,
        "spans",
        lambda length, parts: [slice(0, length // 4), slice(length // 4, length // 2)],
    )
    with pytest.raises(AssertionError):
        np.testing.assert_array_equal(conv.forward(layer, [x], weights)[0], whole)


def test_the_pools_slices_cover_every_row_once():
    for length in (1, 2, 7, 64):
        for parts in (1, 2, 3, 16):
            covered = [i for span in pool.spans(length, parts) for i in range(length)[span]]
            assert covered == list(range(length))


def test_a_product_is_split_in_parts_of_at_least_the_pools_minimum(monkeypatch):
    monkeypatch.setattr(pool, "threads", lambda: 4)
    for macs, parts in [(pool.PARALLEL_MIN_MACS - 1, 1), (3 * pool.PARALLEL_MIN_MACS, 3)]:
        seen = []
        pool.split(pool.parts(8, macs), seen.append)
        assert len(seen) == parts and sorted(s.start for s in seen)[0] == 0


def _data(network):
    """Round n's image and output residual, the same whenever asked (as the rounds make them)."""

    def data(n):
        rng = np.random.default_rng(n)
        image = rng.uniform(-127, 128, (1, *network.input_shape))
        return image, rng.uniform(-1, 1, (1, *network.output_shape)) * 2.0**-28

    return data


def _same(a, b) -> None:
    for n, ws in a.items():
        for k, w in ws.items():
            np.testing.assert_array_equal(w.value, b[n][k].value)
            np.testing.assert_array_equal(w.var, b[n][k].var)


@pytest.mark.parametrize("size", [1, 64, 65, 64 * 7 + 3])
def test_an_elementwise_chain_run_in_blocks_gives_the_whole_arrays_values(size, monkeypatch):
    # The error model's elementwise steps over a layer's weights run a block at a time on
    # the pool's threads: every value as the whole arrays' chain gives it, at every size
    # around a block's, each output of a chain returning two.
    monkeypatch.setattr(pool, "BLOCK_ELEMENTS", 64)
    monkeypatch.setattr(pool, "threads", lambda: 3)
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((2, size, 1)) * 1e3

    def chain(a, b):
        total = a + b
        return total, (1e-7 * total) ** 2 + b * b + 1e-30

    b = b[::-1]  # a view, not contiguous: the blocks read it in its own order
    whole = chain(a, b)
    blocked = pool.elementwise(chain, a, b)
    for one, other in zip(whole, blocked, strict=True):
        assert other.shape == one.shape and other.dtype == one.dtype
        np.testing.assert_array_equal(other, one)
    # A scalar argument (broadcast by the chain) runs the chain on the whole.
    np.testing.assert_array_equal(pool.elementwise(lambda x, s: x * s, a, 3.0), a * 3.0)


def test_a_fully_connected_gradient_in_blocks_of_rows_gives_the_batchs_sums_bit_for_bit(
    monkeypatch,
):
    # WEIGHTS_D sums the batch's products in the batch's order, a block of rows at a time
    # on the pool's threads: every element as the whole outer products' sum gives it.
    layer = make_layer("fc", [(7, 7, 64)], F=300)
    rng = np.random.default_rng(5)
    x, r = rng.standard_normal((3, 7, 7, 64)), rng.standard_normal((3, 1, 1, 300))
    flat = np.transpose(x, (0, 3, 1, 2)).reshape(3, -1)
    rows = r.reshape(3, -1)
    whole = rows[0][:, None] * flat[0][None, :]
    for b in (1, 2):
        whole += rows[b][:, None] * flat[b][None, :]
    monkeypatch.setattr(pool, "PARALLEL_MIN_MACS", 1)
    for threads, block in ((1, 1 << 30), (3, 1), (2, 7 * 7 * 64 * 5 + 1)):
        monkeypatch.setattr(pool, "threads", lambda threads=threads: threads)
        monkeypatch.setattr(pool, "BLOCK_ELEMENTS", block)
        grads = fc.gradient(layer, [x], [r])
        np.testing.assert_array_equal(grads["weights"], whole.reshape(300, 64, 7, 7))


@pytest.mark.parametrize(
    "window", [dict(Rx=3, Ry=3, S=1, Px=1, Py=1), dict(Rx=3, Ry=3, S=2, Px=0, Py=0)]
)
def test_max_pooling_split_over_the_batch_gives_the_one_threads_values_bit_for_bit(
    window, monkeypatch
):
    # Max pooling's backward and its error model's routing and contested windows run a
    # part of the batch on each of the pool's threads: each image as one thread computes it.
    layer = make_layer("maxpool", [(12, 12, 8)], **window)
    model, representable = model_of("float32")
    rng = np.random.default_rng(11)
    x = model.bound(representable(np.round(rng.standard_normal((3, 12, 12, 8)), 1)))
    (out,) = model.forward(layer, [x], {})
    r = model.bound(representable(rng.standard_normal((3, *layer.out_shapes[0]))))
    results = {}
    monkeypatch.setattr(pool, "PARALLEL_MIN_MACS", 1)
    for threads in (1, 3):
        monkeypatch.setattr(pool, "threads", lambda threads=threads: threads)
        (got,) = model.backward(layer, [x], [out], [r], {})
        results[threads] = (got.value, got.var)
    for one, split in zip(results[1], results[3], strict=True):
        np.testing.assert_array_equal(split, one)
    assert np.count_nonzero(results[1][1] > 2 * (1e-7 * results[1][0]) ** 2)  # contested ties


@pytest.mark.parametrize("case", CONVOLUTIONS, ids=lambda c: f"{c['shape']}-F{c['F']}-S{c['S']}")
def test_maps_side_by_side_give_their_concatenations_products_bit_for_bit(case):
    # The error model's two variance passes through a convolution read their maps side by
    # side, never copied into one: each sum as the product of their concatenated map (one
    # map a slab, against two side by side) gives it.
    layer, (x, weights, r) = _case(case)
    twice = {
        "filters": np.concatenate([weights["filters"], weights["filters"] ** 2], axis=2),
        "biases": weights["biases"],
    }
    joined = conv.forward(
        make_layer("conv", [(*x.shape[1:3], 2 * x.shape[3])], **_params(case)),
        [np.concatenate([x, -x], axis=-1)],
        twice,
    )[0]
    np.testing.assert_array_equal(conv.forward_side_by_side(layer, [x, -x], twice), joined)
    wide = {
        "filters": np.concatenate([weights["filters"], 2 * weights["filters"]], axis=3),
        "biases": np.concatenate([weights["biases"]] * 2),
    }
    wide_layer = make_layer("conv", [x.shape[1:]], **{**_params(case), "F": 2 * case["F"]})
    (joined,) = conv.backward(wide_layer, [x], [None], [np.concatenate([r, r * r], -1)], wide)
    np.testing.assert_array_equal(conv.backward_side_by_side(layer, [r, r * r], wide), joined)


def _params(case: dict) -> dict:
    return {k: v for k, v in case.items() if k not in ("shape", "batch")}


def test_a_depthwise_convolution_split_over_the_batch_gives_the_one_threads_sums(monkeypatch):
    layer = make_layer("depthwise", [(10, 10, 16)], Rx=3, Ry=3, S=1, Px=1, Py=1)
    rng = np.random.default_rng(13)
    x, r = rng.standard_normal((3, 10, 10, 16)), rng.standard_normal((3, 10, 10, 16))
    weights = {name: rng.standard_normal(s) for name, s in layer.weight_shapes.items()}
    monkeypatch.setattr(pool, "PARALLEL_MIN_MACS", 1)
    results = {}
    for threads in (1, 3):
        monkeypatch.setattr(pool, "threads", lambda threads=threads: threads)
        results[threads] = [
            depthwise.forward(layer, [x], weights)[0],
            depthwise.backward(layer, [x], [None], [r], weights)[0],
        ]
    for one, split in zip(results[1], results[3], strict=True):
        np.testing.assert_array_equal(split, one)


def test_a_split_inside_a_split_runs_its_parts_on_the_calling_thread():
    # An elementwise step called from a part of another split: with every pool thread busy
    # in the outer split, the inner one must not wait on parts queued behind itself. In a
    # process of its own, which a deadlock would leave hung (the pool's threads are joined
    # at exit): the test fails on the timeout instead.
    script = """
import numpy as np
from pytest_gostcnn.machine import pool
pool.threads = lambda: 2
pool.BLOCK_ELEMENTS = 4
a, out = np.arange(64.0), np.empty((2, 64))

def outer(span):
    out[span] = pool.elementwise(lambda x: x * 2.0, a)

pool.split([slice(0, 1), slice(1, 2)], outer)
assert (out == 2.0 * a).all()
print("done")
"""
    try:
        done = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
        )
    except subprocess.TimeoutExpired:
        pytest.fail("a split inside a split waited on itself")
    assert done.returncode == 0 and done.stdout.strip() == "done", done.stderr


def test_a_part_on_a_pool_thread_runs_under_the_callers_errstate(monkeypatch):
    # NumPy's errstate lives in the caller's context: a part on a pool thread must see it
    # (a run that silences a float64 overflow, or raises on it, does so on every thread).
    monkeypatch.setattr(pool, "threads", lambda: 2)
    monkeypatch.setattr(pool, "BLOCK_ELEMENTS", 4)
    a = -np.ones(64)
    with np.errstate(invalid="raise"), pytest.raises(FloatingPointError):
        pool.elementwise(np.sqrt, a)
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isnan(pool.elementwise(np.sqrt, a)).all()


def test_a_convolutions_weight_gradient_stays_on_its_arrays_device():
    # On another library the row's columns are gathered into one result: on the arrays'
    # device (a PyTorch "meta" tensor stands for a GPU's here).
    torch = pytest.importorskip("torch")
    layer = make_layer("conv", [(6, 6, 4)], F=5, Rx=3, Ry=3, S=1, Px=1, Py=1)
    x = torch.empty((2, 6, 6, 4), dtype=torch.float64, device="meta")
    r = torch.empty((2, *layer.out_shapes[0]), dtype=torch.float64, device="meta")
    grads = conv.gradient(layer, [x], [r])
    assert grads["filters"].device.type == "meta"
    assert tuple(grads["filters"].shape) == layer.weight_shapes["filters"]
