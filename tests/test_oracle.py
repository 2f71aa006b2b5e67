"""The vectorised reference (``reference/``) against the literal oracle (``oracle.py``).

The oracle transcribes Appendix A loop for loop, so wherever the two agree the reference
computes what the standard's C fragments compute. Layers whose steps are pure copies or
comparisons (ReLU, concat, split, eltwise, shuffle, max-pooling forward) must agree
exactly; where the reference sums in another order they agree to ``RTOL``.
Shapes are small because the oracle runs Python loops.
"""

from dataclasses import dataclass

import numpy as np
import oracle
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from pytest_gostcnn.model.layers import Layer, make_layer
from pytest_gostcnn.reference import (
    MODULES,
    avgpool,
    concat,
    conv,
    depthwise,
    eltwise,
    fc,
    maxpool,
    relu,
    shuffle,
    split,
    update,
)

SEED = 5770036
RTOL = 1e-12
# Sums of O(1) terms that cancel to near zero get an absolute slack of the same order.
ATOL = 1e-12
CHANNELS = 3
FILTERS = 2


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(SEED)


@dataclass(frozen=True)
class Window:
    """One input map size, window, stride and padding, and a batch size."""

    X: int
    Y: int
    Rx: int
    Ry: int
    S: int
    Px: int
    Py: int
    B: int

    @property
    def params(self) -> dict[str, int]:
        return {"Rx": self.Rx, "Ry": self.Ry, "S": self.S, "Px": self.Px, "Py": self.Py}

    @property
    def in_shape(self) -> tuple[int, int, int]:
        return (self.X, self.Y, CHANNELS)


def _window(note: str = "", **sizes: int):
    w = Window(**sizes)
    tag = f"{w.X}x{w.Y}-k{w.Rx}x{w.Ry}-s{w.S}-p{w.Px}x{w.Py}-b{w.B}"
    return pytest.param(w, id=f"{tag}-{note}" if note else tag)


WINDOWS = [
    _window(X=5, Y=5, Rx=3, Ry=3, S=1, Px=0, Py=0, B=1),
    _window(X=5, Y=6, Rx=3, Ry=3, S=2, Px=1, Py=1, B=2),
    _window(X=6, Y=6, Rx=3, Ry=3, S=2, Px=1, Py=1, B=1, note="floor-drops-padding"),
    _window(X=7, Y=5, Rx=3, Ry=3, S=3, Px=1, Py=1, B=1),
    _window(X=7, Y=7, Rx=2, Ry=2, S=3, Px=0, Py=0, B=2, note="stride-skips-inputs"),
    _window(X=4, Y=5, Rx=3, Ry=2, S=1, Px=1, Py=0, B=1),
    _window(X=6, Y=4, Rx=2, Ry=3, S=2, Px=0, Py=2, B=2),
    _window(X=4, Y=3, Rx=4, Ry=3, S=1, Px=0, Py=0, B=2, note="global"),
    _window(X=3, Y=4, Rx=1, Ry=1, S=1, Px=0, Py=0, B=2),
    _window(X=3, Y=3, Rx=2, Ry=2, S=1, Px=2, Py=2, B=1, note="windows-all-padding"),
]


def _normal(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.standard_normal(shape)


def _ties(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Integers in -2..2: windows with several equal maxima, and in-bounds zeros that tie
    with max pooling's padding value 0."""
    return rng.integers(-2, 3, size=shape).astype(np.float64)


def _all_negative(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Values in (-2, -1]: a window that touches padding pools to 0, which no input equals."""
    return -rng.uniform(1.0, 2.0, size=shape)


MAXPOOL_INPUTS = [
    pytest.param(_normal, id="normal"),
    pytest.param(_ties, id="ties"),
    pytest.param(_all_negative, id="all-negative"),
]


def _weights(rng: np.random.Generator, layer: Layer) -> dict[str, np.ndarray]:
    return {name: rng.standard_normal(shape) for name, shape in layer.weight_shapes.items()}


def _map(rng: np.random.Generator, batch: int, shape: tuple[int, int, int]) -> np.ndarray:
    return rng.standard_normal((batch, *shape))


def test_oracle_covers_every_step_of_every_layer_type():
    for name, module in MODULES.items():
        steps = ["forward", "backward"]
        if hasattr(module, "gradient"):
            steps += ["gradient", "update"]
        for step in steps:
            assert hasattr(oracle, f"{name}_{step}"), f"oracle.py lacks {name}_{step}"


# Convolution (6.1)


def _conv(w: Window) -> Layer:
    return make_layer("conv", [w.in_shape], F=FILTERS, **w.params)


@pytest.mark.parametrize("w", WINDOWS)
def test_oracle_conv_forward(rng, w):
    layer = _conv(w)
    inp, weights = _map(rng, w.B, w.in_shape), _weights(rng, layer)
    (out,) = conv.forward(layer, [inp], weights)
    expected = oracle.conv_forward(inp, weights["filters"], weights["biases"], w.S, w.Px, w.Py)
    assert_allclose(out, expected, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("w", WINDOWS)
def test_oracle_conv_backward(rng, w):
    layer = _conv(w)
    inp, weights = _map(rng, w.B, w.in_shape), _weights(rng, layer)
    out_residual = _map(rng, w.B, layer.out_shapes[0])
    (out,) = conv.forward(layer, [inp], weights)
    (in_residual,) = conv.backward(layer, [inp], [out], [out_residual], weights)
    expected = oracle.conv_backward(inp, out_residual, weights["filters"], w.S, w.Px, w.Py)
    assert_allclose(in_residual, expected, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("w", WINDOWS)
def test_oracle_conv_gradient(rng, w):
    layer = _conv(w)
    inp, out_residual = _map(rng, w.B, w.in_shape), _map(rng, w.B, layer.out_shapes[0])
    grads = conv.gradient(layer, [inp], [out_residual])
    filters_grad, biases_grad = oracle.conv_gradient(inp, out_residual, w.Rx, w.Ry, w.S, w.Px, w.Py)
    assert_allclose(grads["filters"], filters_grad, rtol=RTOL, atol=ATOL)
    assert_allclose(grads["biases"], biases_grad, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("batch", [1, 3])
def test_oracle_conv_update(rng, batch):
    layer = make_layer("conv", [(4, 4, CHANNELS)], F=FILTERS, Rx=3, Ry=2, S=1, Px=1, Py=0)
    weights, grads = _weights(rng, layer), _weights(rng, layer)
    expected = {name: w.copy() for name, w in weights.items()}
    update(layer, weights, grads, batch)
    oracle.conv_update(
        expected["filters"], expected["biases"], grads["filters"], grads["biases"], batch
    )
    assert_allclose(weights["filters"], expected["filters"], rtol=RTOL)
    assert_allclose(weights["biases"], expected["biases"], rtol=RTOL)


# Max pooling (6.2)


def _maxpool(w: Window) -> Layer:
    return make_layer("maxpool", [w.in_shape], **w.params)


@pytest.mark.parametrize("draw", MAXPOOL_INPUTS)
@pytest.mark.parametrize("w", WINDOWS)
def test_oracle_maxpool_forward(rng, w, draw):
    inp = draw(rng, (w.B, *w.in_shape))
    (out,) = maxpool.forward(_maxpool(w), [inp], {})
    assert_array_equal(out, oracle.maxpool_forward(inp, w.Rx, w.Ry, w.S, w.Px, w.Py))


@pytest.mark.parametrize("draw", MAXPOOL_INPUTS)
@pytest.mark.parametrize("w", WINDOWS)
def test_oracle_maxpool_backward(rng, w, draw):
    layer = _maxpool(w)
    inp = draw(rng, (w.B, *w.in_shape))
    out_residual = _map(rng, w.B, layer.out_shapes[0])
    # OUT from the oracle, so that this test checks the backward step alone.
    out = oracle.maxpool_forward(inp, w.Rx, w.Ry, w.S, w.Px, w.Py)
    (in_residual,) = maxpool.backward(layer, [inp], [out], [out_residual], {})
    expected = oracle.maxpool_backward(inp, out, out_residual, w.Rx, w.Ry, w.S, w.Px, w.Py)
    assert_allclose(in_residual, expected, rtol=RTOL, atol=ATOL)


def test_oracle_maxpool_forward_pools_padding_as_zero():
    # Every 3x3 window of a padded 3x3 map but the centre one reaches into the padding,
    # where the literal FIRST/RES loop takes the value 0, larger than every input -1.
    inp = np.full((1, 3, 3, 1), -1.0)
    layer = make_layer("maxpool", [(3, 3, 1)], Rx=3, Ry=3, S=1, Px=1, Py=1)
    expected = np.array([[0.0, 0.0, 0.0], [0.0, -1.0, 0.0], [0.0, 0.0, 0.0]]).reshape(1, 3, 3, 1)
    assert_array_equal(oracle.maxpool_forward(inp, 3, 3, 1, 1, 1), expected)
    assert_array_equal(maxpool.forward(layer, [inp], {})[0], expected)


# Average pooling (6.2)


def _avgpool(w: Window) -> Layer:
    return make_layer("avgpool", [w.in_shape], **w.params)


@pytest.mark.parametrize("w", WINDOWS)
def test_oracle_avgpool_forward(rng, w):
    inp = _map(rng, w.B, w.in_shape)
    (out,) = avgpool.forward(_avgpool(w), [inp], {})
    expected = oracle.avgpool_forward(inp, w.Rx, w.Ry, w.S, w.Px, w.Py)
    assert_allclose(out, expected, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("w", WINDOWS)
def test_oracle_avgpool_backward(rng, w):
    layer = _avgpool(w)
    inp, out_residual = _map(rng, w.B, w.in_shape), _map(rng, w.B, layer.out_shapes[0])
    (out,) = avgpool.forward(layer, [inp], {})
    (in_residual,) = avgpool.backward(layer, [inp], [out], [out_residual], {})
    expected = oracle.avgpool_backward(inp, out_residual, w.Rx, w.Ry, w.S, w.Px, w.Py)
    assert_allclose(in_residual, expected, rtol=RTOL, atol=ATOL)


# Rectification, ReLU (6.3)

RELU_CASES = [
    pytest.param(1, (4, 3, 2), id="4x3x2-b1"),
    pytest.param(3, (2, 5, 3), id="2x5x3-b3"),
]


@pytest.mark.parametrize(("batch", "shape"), RELU_CASES)
def test_oracle_relu_forward(rng, batch, shape):
    inp = _ties(rng, (batch, *shape))  # exact zeros, where `IN > 0` is false
    (out,) = relu.forward(make_layer("relu", [shape]), [inp], {})
    assert_array_equal(out, oracle.relu_forward(inp))


@pytest.mark.parametrize(("batch", "shape"), RELU_CASES)
def test_oracle_relu_backward(rng, batch, shape):
    layer = make_layer("relu", [shape])
    inp, out_residual = _ties(rng, (batch, *shape)), _map(rng, batch, shape)
    (out,) = relu.forward(layer, [inp], {})
    (in_residual,) = relu.backward(layer, [inp], [out], [out_residual], {})
    assert_array_equal(in_residual, oracle.relu_backward(inp, out_residual))


# Concatenation (6.4)

CONCAT_CASES = [
    pytest.param(1, 1, 1, id="L1-1-L2-1-b1"),
    pytest.param(1, 3, 2, id="L1-1-L2-3-b2"),
    pytest.param(3, 2, 3, id="L1-3-L2-2-b3"),
]


@pytest.mark.parametrize(("l1", "l2", "batch"), CONCAT_CASES)
def test_oracle_concat_forward(rng, l1, l2, batch):
    layer = make_layer("concat", [(3, 2, l1), (3, 2, l2)])
    first, second = _map(rng, batch, (3, 2, l1)), _map(rng, batch, (3, 2, l2))
    (out,) = concat.forward(layer, [first, second], {})
    assert_array_equal(out, oracle.concat_forward(first, second))


@pytest.mark.parametrize(("l1", "l2", "batch"), CONCAT_CASES)
def test_oracle_concat_backward(rng, l1, l2, batch):
    layer = make_layer("concat", [(3, 2, l1), (3, 2, l2)])
    first, second = _map(rng, batch, (3, 2, l1)), _map(rng, batch, (3, 2, l2))
    out_residual = _map(rng, batch, layer.out_shapes[0])
    (out,) = concat.forward(layer, [first, second], {})
    in_residuals = concat.backward(layer, [first, second], [out], [out_residual], {})
    expected = oracle.concat_backward(out_residual, l1)
    assert len(in_residuals) == 2
    assert_array_equal(in_residuals[0], expected[0])
    assert_array_equal(in_residuals[1], expected[1])


# Split (6.5): every L1 from 1 to L-1

SPLIT_DEPTH = 5
SPLIT_CASES = [
    pytest.param(l1, batch, id=f"L1-{l1}-of-{SPLIT_DEPTH}-b{batch}")
    for batch in (1, 2)
    for l1 in range(1, SPLIT_DEPTH)
]


@pytest.mark.parametrize(("l1", "batch"), SPLIT_CASES)
def test_oracle_split_forward(rng, l1, batch):
    layer = make_layer("split", [(2, 3, SPLIT_DEPTH)], L1=l1)
    inp = _map(rng, batch, (2, 3, SPLIT_DEPTH))
    outs = split.forward(layer, [inp], {})
    expected = oracle.split_forward(inp, l1)
    assert len(outs) == 2
    assert_array_equal(outs[0], expected[0])
    assert_array_equal(outs[1], expected[1])


@pytest.mark.parametrize(("l1", "batch"), SPLIT_CASES)
def test_oracle_split_backward(rng, l1, batch):
    layer = make_layer("split", [(2, 3, SPLIT_DEPTH)], L1=l1)
    inp = _map(rng, batch, (2, 3, SPLIT_DEPTH))
    out_residuals = [_map(rng, batch, shape) for shape in layer.out_shapes]
    outs = split.forward(layer, [inp], {})
    (in_residual,) = split.backward(layer, [inp], outs, out_residuals, {})
    assert_array_equal(in_residual, oracle.split_backward(*out_residuals))


# Depthwise convolution (6.6)


def _depthwise(w: Window) -> Layer:
    return make_layer("depthwise", [w.in_shape], **w.params)


@pytest.mark.parametrize("w", WINDOWS)
def test_oracle_depthwise_forward(rng, w):
    layer = _depthwise(w)
    inp, weights = _map(rng, w.B, w.in_shape), _weights(rng, layer)
    (out,) = depthwise.forward(layer, [inp], weights)
    expected = oracle.depthwise_forward(inp, weights["filters"], weights["biases"], w.S, w.Px, w.Py)
    assert_allclose(out, expected, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("w", WINDOWS)
def test_oracle_depthwise_backward(rng, w):
    layer = _depthwise(w)
    inp, weights = _map(rng, w.B, w.in_shape), _weights(rng, layer)
    out_residual = _map(rng, w.B, layer.out_shapes[0])
    (out,) = depthwise.forward(layer, [inp], weights)
    (in_residual,) = depthwise.backward(layer, [inp], [out], [out_residual], weights)
    expected = oracle.depthwise_backward(inp, out_residual, weights["filters"], w.S, w.Px, w.Py)
    assert_allclose(in_residual, expected, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("w", WINDOWS)
def test_oracle_depthwise_gradient(rng, w):
    layer = _depthwise(w)
    inp, out_residual = _map(rng, w.B, w.in_shape), _map(rng, w.B, layer.out_shapes[0])
    grads = depthwise.gradient(layer, [inp], [out_residual])
    filters_grad, biases_grad = oracle.depthwise_gradient(
        inp, out_residual, w.Rx, w.Ry, w.S, w.Px, w.Py
    )
    assert_allclose(grads["filters"], filters_grad, rtol=RTOL, atol=ATOL)
    assert_allclose(grads["biases"], biases_grad, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("batch", [1, 3])
def test_oracle_depthwise_update(rng, batch):
    layer = make_layer("depthwise", [(4, 4, CHANNELS)], Rx=2, Ry=3, S=1, Px=0, Py=1)
    weights, grads = _weights(rng, layer), _weights(rng, layer)
    expected = {name: w.copy() for name, w in weights.items()}
    update(layer, weights, grads, batch)
    oracle.depthwise_update(
        expected["filters"], expected["biases"], grads["filters"], grads["biases"], batch
    )
    assert_allclose(weights["filters"], expected["filters"], rtol=RTOL)
    assert_allclose(weights["biases"], expected["biases"], rtol=RTOL)


# Elementwise addition (6.7)

ELTWISE_CASES = [
    pytest.param(1, (3, 2, 4), id="3x2x4-b1"),
    pytest.param(3, (2, 4, 1), id="2x4x1-b3"),
]


@pytest.mark.parametrize(("batch", "shape"), ELTWISE_CASES)
def test_oracle_eltwise_forward(rng, batch, shape):
    first, second = _map(rng, batch, shape), _map(rng, batch, shape)
    (out,) = eltwise.forward(make_layer("eltwise", [shape, shape]), [first, second], {})
    assert_array_equal(out, oracle.eltwise_forward(first, second))


@pytest.mark.parametrize(("batch", "shape"), ELTWISE_CASES)
def test_oracle_eltwise_backward(rng, batch, shape):
    layer = make_layer("eltwise", [shape, shape])
    first, second = _map(rng, batch, shape), _map(rng, batch, shape)
    out_residual = _map(rng, batch, shape)
    (out,) = eltwise.forward(layer, [first, second], {})
    in_residuals = eltwise.backward(layer, [first, second], [out], [out_residual], {})
    expected = oracle.eltwise_backward(out_residual)
    assert len(in_residuals) == 2
    assert_array_equal(in_residuals[0], expected[0])
    assert_array_equal(in_residuals[1], expected[1])


# Fully connected (6.8): the reference holds OUT[B][F] as the map [B][1][1][F]

FC_OUTPUTS = 3
FC_CASES = [
    pytest.param(1, (1, 1, 5), id="1x1x5-b1"),
    pytest.param(3, (3, 2, 4), id="3x2x4-b3"),
    pytest.param(2, (2, 3, 1), id="2x3x1-b2"),
    pytest.param(1, (4, 4, 2), id="4x4x2-b1"),
]


def _fc(shape: tuple[int, int, int]) -> Layer:
    return make_layer("fc", [shape], F=FC_OUTPUTS)


@pytest.mark.parametrize(("batch", "shape"), FC_CASES)
def test_oracle_fc_forward(rng, batch, shape):
    layer = _fc(shape)
    inp, weights = _map(rng, batch, shape), _weights(rng, layer)
    (out,) = fc.forward(layer, [inp], weights)
    expected = oracle.fc_forward(inp, weights["weights"], weights["biases"])
    assert_allclose(out, expected.reshape(batch, 1, 1, FC_OUTPUTS), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize(("batch", "shape"), FC_CASES)
def test_oracle_fc_backward(rng, batch, shape):
    layer = _fc(shape)
    inp, weights = _map(rng, batch, shape), _weights(rng, layer)
    out_residual = _map(rng, batch, layer.out_shapes[0])
    (out,) = fc.forward(layer, [inp], weights)
    (in_residual,) = fc.backward(layer, [inp], [out], [out_residual], weights)
    expected = oracle.fc_backward(inp, out_residual.reshape(batch, FC_OUTPUTS), weights["weights"])
    assert_allclose(in_residual, expected, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize(("batch", "shape"), FC_CASES)
def test_oracle_fc_gradient(rng, batch, shape):
    layer = _fc(shape)
    inp, out_residual = _map(rng, batch, shape), _map(rng, batch, layer.out_shapes[0])
    grads = fc.gradient(layer, [inp], [out_residual])
    weights_grad, biases_grad = oracle.fc_gradient(inp, out_residual.reshape(batch, FC_OUTPUTS))
    assert_allclose(grads["weights"], weights_grad, rtol=RTOL, atol=ATOL)
    assert_allclose(grads["biases"], biases_grad, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("batch", [1, 3])
def test_oracle_fc_update(rng, batch):
    layer = _fc((3, 2, 4))
    weights, grads = _weights(rng, layer), _weights(rng, layer)
    expected = {name: w.copy() for name, w in weights.items()}
    update(layer, weights, grads, batch)
    oracle.fc_update(
        expected["weights"], expected["biases"], grads["weights"], grads["biases"], batch
    )
    assert_allclose(weights["weights"], expected["weights"], rtol=RTOL)
    assert_allclose(weights["biases"], expected["biases"], rtol=RTOL)


# Channel shuffle (6.9)

SHUFFLE_CASES = [
    pytest.param(depth, groups, batch, id=f"L{depth}-G{groups}-b{batch}")
    for depth, groups, batch in [
        (4, 2, 1),
        (6, 2, 2),
        (6, 3, 1),
        (12, 3, 2),
        (8, 4, 1),
        (12, 4, 2),
        (5, 1, 1),  # one group: the identity
        (4, 4, 2),  # one channel per group: the identity
    ]
]


@pytest.mark.parametrize(("depth", "groups", "batch"), SHUFFLE_CASES)
def test_oracle_shuffle_forward(rng, depth, groups, batch):
    inp = _map(rng, batch, (2, 3, depth))
    (out,) = shuffle.forward(make_layer("shuffle", [(2, 3, depth)], G=groups), [inp], {})
    assert_array_equal(out, oracle.shuffle_forward(inp, groups))


@pytest.mark.parametrize(("depth", "groups", "batch"), SHUFFLE_CASES)
def test_oracle_shuffle_backward(rng, depth, groups, batch):
    layer = make_layer("shuffle", [(2, 3, depth)], G=groups)
    inp, out_residual = _map(rng, batch, (2, 3, depth)), _map(rng, batch, (2, 3, depth))
    (out,) = shuffle.forward(layer, [inp], {})
    (in_residual,) = shuffle.backward(layer, [inp], [out], [out_residual], {})
    assert_array_equal(in_residual, oracle.shuffle_backward(out_residual, groups))


# The update step (3.35): W += W_D / B, literally


@pytest.mark.parametrize(
    ("type_name", "params"),
    [
        pytest.param("conv", {"F": 2, "Rx": 2, "Ry": 2, "S": 1, "Px": 0, "Py": 0}, id="conv"),
        pytest.param("depthwise", {"Rx": 2, "Ry": 2, "S": 1, "Px": 0, "Py": 0}, id="depthwise"),
        pytest.param("fc", {"F": 2}, id="fc"),
    ],
)
def test_oracle_update_adds_residual_divided_by_batch(type_name, params):
    # W = 1, W_D = 6, B = 3: W + W_D/B = 3. A minus sign would give -1, no division 7,
    # a learning rate anything else.
    layer = make_layer(type_name, [(3, 3, 2)], **params)
    weights = {name: np.full(shape, 1.0) for name, shape in layer.weight_shapes.items()}
    grads = {name: np.full(shape, 6.0) for name, shape in layer.weight_shapes.items()}
    literal = {name: w.copy() for name, w in weights.items()}
    update(layer, weights, grads, 3)
    main = "weights" if type_name == "fc" else "filters"
    oracle_update = getattr(oracle, f"{type_name}_update")
    oracle_update(literal[main], literal["biases"], grads[main], grads["biases"], 3)
    for name, shape in layer.weight_shapes.items():
        assert_array_equal(weights[name], np.full(shape, 3.0))
        assert_array_equal(literal[name], np.full(shape, 3.0))
