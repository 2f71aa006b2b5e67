"""The one schedule of the training steps (standard.md §3), run with the reference kernels.

The networks here are tiny hand-written tables; each is built to make one property of the
schedule observable: fan-out, split/concat, linearity for an adjoint check, or aliasing.
"""

import copy
import weakref

import numpy as np
import pytest
import yaml

from pytest_gostcnn.model.data import draw_input, draw_out_residual, draw_weights
from pytest_gostcnn.model.executor import KernelError, infer, train
from pytest_gostcnn.model.layers import NETWORK_INPUT, Layer, MapRef
from pytest_gostcnn.model.network import Network, parse_table
from pytest_gostcnn.reference import (
    ReferenceKernels,
    concat,
    conv,
    depthwise,
    eltwise,
    maxpool,
    relu,
    split,
)


def table(name: str, input_shape: str, rows: str) -> Network:
    text = f"""\
letter: Р
name: {name}
provenance: reconstruction
input: {input_shape}
layers:
{rows}"""
    return parse_table(yaml.safe_load(text), name)


# Row 2's output is read by rows 3 and 4 (fan-out); rows 5 and 7 are a split/concat pair.
FAN_OUT = table(
    "fan-out",
    "{X: 5, Y: 4, L: 2}",
    """\
  - {n: 1, type: conv, F: 3, Rx: 3, Ry: 3, S: 1, Px: 1, Py: 1}
  - {n: 2, type: relu, in1: 1}
  - {n: 3, type: conv, in1: 2, F: 3, Rx: 3, Ry: 3, S: 1, Px: 1, Py: 1}
  - {n: 4, type: eltwise, in1: 2, in2: 3}
  - {n: 5, type: split, in1: 4, L1: 1}
  - {n: 6, type: depthwise, in1: "5.2", Rx: 3, Ry: 3, S: 1, Px: 1, Py: 1}
  - {n: 7, type: concat, in1: "5.1", in2: 6}
  - {n: 8, type: maxpool, in1: 7, Rx: 2, Ry: 2, S: 2, Px: 0, Py: 0}
""",
)

# Every layer type that is linear in its input (no relu, no maxpool), so the network
# output is affine in the input and in each layer's weights; row 1 fans out to 2 and 7.
LINEAR = table(
    "linear",
    "{X: 6, Y: 5, L: 4}",
    """\
  - {n: 1, type: conv, F: 4, Rx: 3, Ry: 3, S: 2, Px: 1, Py: 1}
  - {n: 2, type: split, in1: 1, L1: 2}
  - {n: 3, type: depthwise, in1: "2.1", Rx: 3, Ry: 3, S: 1, Px: 1, Py: 1}
  - {n: 4, type: avgpool, in1: "2.2", Rx: 3, Ry: 3, S: 1, Px: 1, Py: 1}
  - {n: 5, type: concat, in1: 3, in2: 4}
  - {n: 6, type: shuffle, in1: 5, G: 2}
  - {n: 7, type: eltwise, in1: 6, in2: 1}
  - {n: 8, type: fc, in1: 7, F: 3}
""",
)

# All ten row types; map 2 is read by rows 3 and 9, maps 4.2, 7 and 8 only by layers
# whose later steps do not read them.
ALL_TYPES = table(
    "all types",
    "{X: 6, Y: 5, L: 3}",
    """\
  - {n: 1, type: conv, F: 4, Rx: 3, Ry: 3, S: 1, Px: 1, Py: 1}
  - {n: 2, type: relu, in1: 1}
  - {n: 3, type: maxpool, in1: 2, Rx: 3, Ry: 3, S: 1, Px: 1, Py: 1}
  - {n: 4, type: split, in1: 3, L1: 2}
  - {n: 5, type: depthwise, in1: "4.1", Rx: 3, Ry: 3, S: 1, Px: 1, Py: 1}
  - {n: 6, type: avgpool, in1: "4.2", Rx: 3, Ry: 3, S: 1, Px: 1, Py: 1}
  - {n: 7, type: concat, in1: 5, in2: 6}
  - {n: 8, type: shuffle, in1: 7, G: 2}
  - {n: 9, type: eltwise, in1: 8, in2: 2}
  - {n: 10, type: maxpool, in1: 9, Rx: 2, Ry: 2, S: 2, Px: 0, Py: 0}
  - {n: 11, type: fc, in1: 10, F: 3}
""",
)

# Map 1 feeds eltwise 4, whose output feeds eltwise 5: backward of 5 and 4 hands one
# residual array to maps 1, 2 and 3 at once, and rows 3 and 2 read it after map 1 has
# received a second residual.
ALIASED = table(
    "aliased",
    "{X: 4, Y: 3, L: 2}",
    """\
  - {n: 1, type: conv, F: 2, Rx: 3, Ry: 3, S: 1, Px: 1, Py: 1}
  - {n: 2, type: conv, in1: 1, F: 2, Rx: 1, Ry: 1, S: 1, Px: 0, Py: 0}
  - {n: 3, type: conv, in1: 1, F: 2, Rx: 1, Ry: 1, S: 1, Px: 0, Py: 0}
  - {n: 4, type: eltwise, in1: 1, in2: 2}
  - {n: 5, type: eltwise, in1: 4, in2: 3}
""",
)

# What the backward and gradient steps of a layer read besides OUT_D and the weights
# (Appendix A): the convolutions read IN for the gradient, ReLU decides on IN, max pooling
# compares IN with OUT. The other layers read neither.
READS_IN = {"conv", "depthwise", "fc", "relu", "maxpool"}
READS_OUT = {"maxpool"}


def draws(network: Network, batch: int, seed: int):
    """standard.md §6 data: weights, input and output residual."""
    rng = np.random.default_rng(seed)
    weights = draw_weights(network, rng)
    return weights, draw_input(network, batch, rng), draw_out_residual(network, batch, rng)


def rows(network: Network) -> dict[int, Layer]:
    return {layer.number: layer for layer in network.layers}


# --- (a) train is the hand-composed reference -----------------------------------------


def hand_composed_fan_out(weights, image, out_residual):
    """FAN_OUT trained by calling the reference modules one by one, in table order."""
    w, row = weights, rows(FAN_OUT)
    (o1,) = conv.forward(row[1], [image], w[1])
    (o2,) = relu.forward(row[2], [o1], {})
    (o3,) = conv.forward(row[3], [o2], w[3])
    (o4,) = eltwise.forward(row[4], [o2, o3], {})
    o5_1, o5_2 = split.forward(row[5], [o4], {})
    (o6,) = depthwise.forward(row[6], [o5_2], w[6])
    (o7,) = concat.forward(row[7], [o5_1, o6], {})
    (o8,) = maxpool.forward(row[8], [o7], {})

    (d7,) = maxpool.backward(row[8], [o7], [o8], [out_residual], {})
    d5_1, d6 = concat.backward(row[7], [], [], [d7], {})
    (d5_2,) = depthwise.backward(row[6], [o5_2], [], [d6], w[6])
    (d4,) = split.backward(row[5], [], [], [d5_1, d5_2], {})
    d2_from_eltwise, d3 = eltwise.backward(row[4], [], [], [d4], {})
    (d2_from_conv,) = conv.backward(row[3], [o2], [], [d3], w[3])
    d2 = d2_from_eltwise + d2_from_conv  # standard.md §3 gap: residuals sum at fan-out
    (d1,) = relu.backward(row[2], [o1], [], [d2], {})
    (input_residual,) = conv.backward(row[1], [image], [], [d1], w[1])
    gradients = {
        1: conv.gradient(row[1], [image], [d1]),
        3: conv.gradient(row[3], [o2], [d3]),
        6: depthwise.gradient(row[6], [o5_2], [d6]),
    }
    return o8, input_residual, gradients


@pytest.fixture(scope="module")
def fan_out_run():
    weights, image, out_residual = draws(FAN_OUT, batch=2, seed=1)
    expected = hand_composed_fan_out(copy.deepcopy(weights), image, out_residual)
    result = train(FAN_OUT, ReferenceKernels(), weights, image, out_residual)
    return result, expected


def test_train_output_is_the_forward_pass_up_the_table(fan_out_run):
    result, (output, _, _) = fan_out_run
    np.testing.assert_array_equal(result.output, output)


def test_train_input_residual_sums_the_residuals_of_every_reader(fan_out_run):
    result, (_, input_residual, _) = fan_out_run
    np.testing.assert_array_equal(result.input_residual, input_residual)


def test_train_gradients_use_the_weights_of_the_forward_pass(fan_out_run):
    result, (_, _, gradients) = fan_out_run
    assert result.gradients.keys() == gradients.keys()
    for number, expected in gradients.items():
        assert result.gradients[number].keys() == expected.keys()
        for name, grad in expected.items():
            np.testing.assert_array_equal(result.gradients[number][name], grad, err_msg=name)


# --- (b) backward is the adjoint of forward -------------------------------------------

# The output is affine in the input and in each layer's weights, so a forward difference is
# the exact directional derivative up to rounding, and the residuals must satisfy
# <out_residual, d output> = <input_residual, d input> = <gradient, d weights>.
ADJOINT_RTOL = 1e-9


@pytest.fixture(scope="module")
def linear_run():
    weights, image, out_residual = draws(LINEAR, batch=2, seed=2)
    result = train(LINEAR, ReferenceKernels(), copy.deepcopy(weights), image, out_residual)
    return weights, image, out_residual, result


def test_input_residual_is_the_adjoint_of_the_forward_pass(linear_run):
    weights, image, out_residual, result = linear_run
    direction = np.random.default_rng(3).uniform(-127, 128, size=image.shape)
    kernels = ReferenceKernels()
    d_output = infer(LINEAR, kernels, weights, image + direction) - infer(
        LINEAR, kernels, weights, image
    )
    assert np.vdot(out_residual, d_output) == pytest.approx(
        np.vdot(result.input_residual, direction), rel=ADJOINT_RTOL
    )


@pytest.mark.parametrize("number", [1, 3, 8], ids=["conv", "depthwise", "fc"])
def test_gradient_is_the_adjoint_of_the_layers_weights(linear_run, number):
    weights, image, out_residual, result = linear_run
    rng = np.random.default_rng(4)
    direction = {name: rng.uniform(-1, 1, size=w.shape) for name, w in weights[number].items()}
    moved = copy.deepcopy(weights)
    for name, step in direction.items():
        moved[number][name] += step
    kernels = ReferenceKernels()
    d_output = infer(LINEAR, kernels, moved, image) - infer(LINEAR, kernels, weights, image)
    along_gradient = sum(np.vdot(result.gradients[number][n], d) for n, d in direction.items())
    assert np.vdot(out_residual, d_output) == pytest.approx(along_gradient, rel=ADJOINT_RTOL)


# --- (c) infer and (d) update ---------------------------------------------------------


def test_infer_gives_the_output_of_the_training_forward_pass():
    weights, image, out_residual = draws(ALL_TYPES, batch=2, seed=5)
    inferred = infer(ALL_TYPES, ReferenceKernels(), weights, image)
    trained = train(ALL_TYPES, ReferenceKernels(), weights, image, out_residual)
    np.testing.assert_array_equal(inferred, trained.output)


def test_update_adds_gradient_over_batch_to_every_weight_array():
    weights, image, out_residual = draws(ALL_TYPES, batch=3, seed=6)
    before = copy.deepcopy(weights)
    result = train(ALL_TYPES, ReferenceKernels(), weights, image, out_residual)
    assert weights.keys() == {1, 5, 11}
    for number, arrays in weights.items():
        for name, array in arrays.items():
            # Appendix A, literally: W += W_D / B (plus sign, no learning rate).
            expected = before[number][name] + result.gradients[number][name] / 3
            np.testing.assert_array_equal(array, expected, err_msg=f"row {number} {name}")


def test_update_changes_the_callers_weight_arrays_in_place():
    weights, image, out_residual = draws(ALL_TYPES, batch=2, seed=7)
    arrays = {(n, name): a for n, layer in weights.items() for name, a in layer.items()}
    train(ALL_TYPES, ReferenceKernels(), weights, image, out_residual)
    for (number, name), array in arrays.items():
        assert weights[number][name] is array


def test_train_leaves_its_image_and_out_residual_unchanged():
    weights, image, out_residual = draws(ALIASED, batch=2, seed=8)
    image_before, out_residual_before = image.copy(), out_residual.copy()
    train(ALIASED, ReferenceKernels(), weights, image, out_residual)
    np.testing.assert_array_equal(image, image_before)
    np.testing.assert_array_equal(out_residual, out_residual_before)


# --- (e) what each step receives and what stays in memory -----------------------------


class RecordingKernels(ReferenceKernels):
    """Reference kernels that keep every array each step of each row received or made."""

    def __init__(self) -> None:
        self.forward_calls: dict[int, tuple[list, list]] = {}
        self.backward_calls: dict[int, tuple[list, list, list]] = {}
        self.gradient_calls: dict[int, tuple[list, list]] = {}

    def forward(self, layer, inputs, weights):
        outputs = super().forward(layer, inputs, weights)
        self.forward_calls[layer.number] = (inputs, outputs)
        return outputs

    def backward(self, layer, inputs, outputs, out_residuals, weights):
        self.backward_calls[layer.number] = (inputs, outputs, out_residuals)
        return super().backward(layer, inputs, outputs, out_residuals, weights)

    def gradient(self, layer, inputs, out_residuals):
        self.gradient_calls[layer.number] = (inputs, out_residuals)
        return super().gradient(layer, inputs, out_residuals)


def same_objects(received: list, expected: list) -> bool:
    return len(received) == len(expected) and all(
        a is b for a, b in zip(received, expected, strict=True)
    )


@pytest.fixture(scope="module")
def recorded_training():
    weights, image, out_residual = draws(ALL_TYPES, batch=2, seed=9)
    kernels = RecordingKernels()
    train(ALL_TYPES, kernels, weights, image, out_residual)
    return kernels


@pytest.mark.parametrize(
    "layer", ALL_TYPES.layers, ids=lambda layer: f"{layer.number}-{layer.type.name}"
)
def test_backward_receives_the_very_maps_of_forward_that_its_layer_reads(recorded_training, layer):
    forward_inputs, forward_outputs = recorded_training.forward_calls[layer.number]
    inputs, outputs, _ = recorded_training.backward_calls[layer.number]
    name = layer.type.name
    assert same_objects(inputs, forward_inputs if name in READS_IN else [])
    assert same_objects(outputs, forward_outputs if name in READS_OUT else [])


@pytest.mark.parametrize(
    "layer", ALL_TYPES.weight_layers, ids=lambda layer: f"{layer.number}-{layer.type.name}"
)
def test_gradient_receives_the_forward_input_and_the_backward_out_residual(
    recorded_training, layer
):
    forward_inputs, _ = recorded_training.forward_calls[layer.number]
    _, _, out_residuals = recorded_training.backward_calls[layer.number]
    inputs, gradient_out_residuals = recorded_training.gradient_calls[layer.number]
    assert same_objects(inputs, forward_inputs)
    assert same_objects(gradient_out_residuals, out_residuals)


class LivenessKernels(ReferenceKernels):
    """Reference kernels that note, at the start of every step, which maps are still alive.

    Forward keeps only a weak reference to every output it hands out. With ``copy_outputs``
    it hands out a fresh copy, so a map is alive exactly while the executor holds it; without,
    it hands out what the reference returned, so a map is also alive while another map
    refers to it (a view of it).
    """

    def __init__(self, copy_outputs: bool = True) -> None:
        self.copy_outputs = copy_outputs
        self.maps: dict[MapRef, weakref.ref] = {}
        self.alive: dict[tuple[str, int], set[MapRef]] = {}

    def _note(self, step: str, number: int) -> None:
        self.alive[step, number] = {ref for ref, map_ in self.maps.items() if map_() is not None}

    def forward(self, layer, inputs, weights):
        self._note("forward", layer.number)
        outputs = super().forward(layer, inputs, weights)
        if self.copy_outputs:
            outputs = [output.copy() for output in outputs]
        for ref, output in zip(layer.outputs, outputs, strict=True):
            self.maps[ref] = weakref.ref(output)
        return outputs

    def backward(self, layer, inputs, outputs, out_residuals, weights):
        self._note("backward", layer.number)
        return super().backward(layer, inputs, outputs, out_residuals, weights)

    def update(self, layer, weights, grads, batch):
        self._note("update", layer.number)
        super().update(layer, weights, grads, batch)


def forward_readers(network: Network) -> dict[MapRef, set[int]]:
    """For each map, the rows whose forward step reads it."""
    readers: dict[MapRef, set[int]] = {}
    for layer in network.layers:
        for ref in layer.inputs:
            readers.setdefault(ref, set()).add(layer.number)
    return readers


def later_step_readers(network: Network) -> dict[MapRef, set[int]]:
    """For each map, the rows whose backward or gradient step reads it (READS_IN/OUT)."""
    readers: dict[MapRef, set[int]] = {}
    for layer in network.layers:
        refs = (layer.inputs if layer.type.name in READS_IN else ()) + (
            layer.outputs if layer.type.name in READS_OUT else ()
        )
        for ref in refs:
            readers.setdefault(ref, set()).add(layer.number)
    return readers


def produced_before(network: Network, number: int) -> list[MapRef]:
    return [ref for layer in network.layers if layer.number < number for ref in layer.outputs]


def test_infer_holds_a_map_only_until_its_last_reader():
    weights, image, _ = draws(ALL_TYPES, batch=2, seed=10)
    kernels = LivenessKernels()
    infer(ALL_TYPES, kernels, weights, image)
    readers = forward_readers(ALL_TYPES)
    for layer in ALL_TYPES.layers:
        n = layer.number
        still_read = {ref for ref in produced_before(ALL_TYPES, n) if max(readers[ref]) >= n}
        assert kernels.alive["forward", n] == still_read, f"forward of row {n}"


def test_training_forward_keeps_a_map_only_for_a_later_reader():
    weights, image, out_residual = draws(ALL_TYPES, batch=2, seed=11)
    kernels = LivenessKernels()
    train(ALL_TYPES, kernels, weights, image, out_residual)
    readers, kept_for = forward_readers(ALL_TYPES), later_step_readers(ALL_TYPES)
    # Maps 4.2, 7 and 8 are read by forward only (avgpool, shuffle, eltwise).
    assert {MapRef(4, 1), MapRef(7), MapRef(8)}.isdisjoint(kept_for)
    for layer in ALL_TYPES.layers:
        n = layer.number
        needed = {
            ref
            for ref in produced_before(ALL_TYPES, n)
            if max(readers[ref]) >= n or ref in kept_for
        }
        assert kernels.alive["forward", n] == needed, f"forward of row {n}"


def test_training_backward_releases_a_map_after_the_last_step_that_reads_it():
    weights, image, out_residual = draws(ALL_TYPES, batch=2, seed=12)
    kernels = LivenessKernels()
    train(ALL_TYPES, kernels, weights, image, out_residual)
    kept_for = later_step_readers(ALL_TYPES)
    # The caller holds the network input; train returns the network output.
    network_output = ALL_TYPES.layers[-1].outputs[0]
    for layer in ALL_TYPES.layers:
        n = layer.number
        # Backward runs down the table: a map is still needed while a row <= n reads it.
        needed = {
            ref for ref, rows_ in kept_for.items() if min(rows_) <= n and ref != NETWORK_INPUT
        }
        assert kernels.alive["backward", n] == needed | {network_output}, f"backward of row {n}"
    for layer in ALL_TYPES.weight_layers:
        assert kernels.alive["update", layer.number] == {network_output}


# Map 2 is read only by split 3, whose backward reads nothing, so training may drop it after
# forward 3; conv 4's gradient keeps 3.2 until backward 4 (as in network Ш, rows 13-15).
SPLIT_AFTER_SHUFFLE = table(
    "split after shuffle",
    "{X: 4, Y: 3, L: 4}",
    """\
  - {n: 1, type: conv, F: 4, Rx: 1, Ry: 1, S: 1, Px: 0, Py: 0}
  - {n: 2, type: shuffle, in1: 1, G: 2}
  - {n: 3, type: split, in1: 2, L1: 2}
  - {n: 4, type: conv, in1: "3.2", F: 2, Rx: 1, Ry: 1, S: 1, Px: 0, Py: 0}
  - {n: 5, type: concat, in1: "3.1", in2: 4}
""",
)


def test_a_kept_split_output_does_not_keep_the_splits_input_alive():
    weights, image, out_residual = draws(SPLIT_AFTER_SHUFFLE, batch=2, seed=14)
    kernels = LivenessKernels(copy_outputs=False)  # what the reference returns, views and all
    train(SPLIT_AFTER_SHUFFLE, kernels, weights, image, out_residual)
    first, second = MapRef(3, 0), MapRef(3, 1)
    assert kernels.alive["forward", 4] == {first, second}
    assert kernels.alive["forward", 5] == {first, second, MapRef(4)}
    # Train returns map 5; 3.2 stays for the gradient of row 4, map 2 for nothing.
    assert kernels.alive["backward", 5] == {second, MapRef(5)}
    assert kernels.alive["backward", 4] == {second, MapRef(5)}
    assert kernels.alive["backward", 3] == {MapRef(5)}


# --- (f) one residual array for both inputs of eltwise --------------------------------


def test_eltwise_backward_hands_out_one_array_for_both_inputs():
    # The premise of the next test: the reference shares one array between the inputs.
    layer = rows(ALIASED)[4]
    residual = np.ones((1, 4, 3, 2))
    first, second = eltwise.backward(layer, [], [], [residual], {})
    assert first is second


def test_shared_eltwise_residual_is_not_corrupted_by_the_fan_out_sum():
    weights, image, out_residual = draws(ALIASED, batch=2, seed=13)
    w, row = copy.deepcopy(weights), rows(ALIASED)
    (o1,) = conv.forward(row[1], [image], w[1])
    # Backward of rows 5 and 4: maps 1, 2 and 3 each receive out_residual itself.
    (d1_from_3,) = conv.backward(row[3], [o1], [], [out_residual], w[3])
    (d1_from_2,) = conv.backward(row[2], [o1], [], [out_residual], w[2])
    d1 = out_residual + d1_from_3 + d1_from_2
    (input_residual,) = conv.backward(row[1], [image], [], [d1], w[1])
    gradient_2 = conv.gradient(row[2], [o1], [out_residual])

    result = train(ALIASED, ReferenceKernels(), weights, image, out_residual.copy())
    np.testing.assert_allclose(result.input_residual, input_residual, rtol=1e-12)
    np.testing.assert_array_equal(result.gradients[2]["filters"], gradient_2["filters"])
    np.testing.assert_array_equal(result.gradients[2]["biases"], gradient_2["biases"])


# --- (g) every array a kernel returns is checked where it enters the schedule ---------


class Wrong(ReferenceKernels):
    """Reference kernels with one step of one row replaced by ``returns(correct_result)``."""

    def __init__(self, step: str, number: int, returns) -> None:
        self.step, self.number, self.returns = step, number, returns

    def _maybe(self, step, layer, result):
        return self.returns(result) if (step, layer.number) == (self.step, self.number) else result

    def forward(self, layer, inputs, weights):
        return self._maybe("forward", layer, super().forward(layer, inputs, weights))

    def backward(self, layer, inputs, outputs, out_residuals, weights):
        result = super().backward(layer, inputs, outputs, out_residuals, weights)
        return self._maybe("backward", layer, result)

    def gradient(self, layer, inputs, out_residuals):
        return self._maybe("gradient", layer, super().gradient(layer, inputs, out_residuals))


def kernel_error(kernels) -> str:
    weights, image, out_residual = draws(FAN_OUT, batch=2, seed=15)
    with pytest.raises(KernelError) as excinfo:
        train(FAN_OUT, kernels, weights, image, out_residual)
    return str(excinfo.value)


# FAN_OUT's maps at B=2: rows 1-4 [2][5][4][3]; split 5 gives 5.1 [2][5][4][1] and 5.2
# [2][5][4][2]; row 6 [2][5][4][2]; concat 7 [2][5][4][3]; max pooling 8 [2][2][2][3].
WRONG_RETURNS = [
    pytest.param(
        ("forward", 5, lambda outs: outs[:1]),
        "Wrong.forward of row 5 (split): expected a list of 2 array(s) "
        "(output 5.1, output 5.2), got 1 item(s)",
        id="forward-too-few-outputs",
    ),
    pytest.param(
        ("forward", 2, lambda outs: outs[0]),
        "Wrong.forward of row 2 (relu): expected a list of 1 array(s) (output 2), "
        "got shape (2, 5, 4, 3)",
        id="forward-bare-array",
    ),
    pytest.param(
        ("forward", 5, lambda outs: outs[::-1]),
        "Wrong.forward of row 5 (split): output 5.1: expected shape (2, 5, 4, 1), "
        "got shape (2, 5, 4, 2)",
        id="forward-outputs-swapped",
    ),
    pytest.param(
        ("forward", 8, lambda outs: [outs[0][0]]),
        "Wrong.forward of row 8 (maxpool): output 8: expected shape (2, 2, 2, 3), "
        "got shape (2, 2, 3)",
        id="forward-without-batch-axis",
    ),
    pytest.param(
        ("backward", 4, lambda residuals: residuals[:1]),
        "Wrong.backward of row 4 (eltwise): expected a list of 2 array(s) "
        "(residual of in1, residual of in2), got 1 item(s)",
        id="backward-one-residual-for-two-inputs",
    ),
    pytest.param(
        # Concat's in2 is map 6; the kernel hands back a residual as deep as OUT_D.
        ("backward", 7, lambda residuals: [residuals[0], np.zeros((2, 5, 4, 3))]),
        "Wrong.backward of row 7 (concat): residual of in2: expected shape (2, 5, 4, 2), "
        "got shape (2, 5, 4, 3)",
        id="backward-wrong-shape",
    ),
    pytest.param(
        ("gradient", 3, lambda grads: {"filters": grads["filters"]}),
        "Wrong.gradient of row 3 (conv): expected a dict with keys ['biases', 'filters'], "
        "got keys ['filters']",
        id="gradient-missing-weight",
    ),
    pytest.param(
        # Depthwise BIASES are [L]; a kernel that did not sum OUT_D over the batch gives [B][L].
        ("gradient", 6, lambda grads: {**grads, "biases": np.zeros((2, 2))}),
        "Wrong.gradient of row 6 (depthwise): biases: expected shape (2,), got shape (2, 2)",
        id="gradient-wrong-shape",
    ),
]


@pytest.mark.parametrize(("wrong", "message"), WRONG_RETURNS)
def test_a_kernel_returning_the_wrong_arrays_is_a_kernel_error(wrong, message):
    # The message names the kernels' class, the row, its type and the step, then what the
    # table expects and what came back.
    assert kernel_error(Wrong(*wrong)) == message


class Tuples(ReferenceKernels):
    """Hands every forward and backward step's maps back as a tuple, not a list."""

    def forward(self, layer, inputs, weights):
        return tuple(super().forward(layer, inputs, weights))

    def backward(self, layer, inputs, outputs, out_residuals, weights):
        return tuple(super().backward(layer, inputs, outputs, out_residuals, weights))


def test_a_kernel_may_return_its_maps_as_a_tuple(fan_out_run):
    # docs/backends.md: "a list (or a tuple)"; a vendor's C++ binding often returns one.
    weights, image, out_residual = draws(FAN_OUT, batch=2, seed=1)
    result = train(FAN_OUT, Tuples(), weights, image, out_residual)
    np.testing.assert_array_equal(result.output, fan_out_run[0].output)
    np.testing.assert_array_equal(result.input_residual, fan_out_run[0].input_residual)


def test_a_kernel_error_is_a_value_error():
    assert issubclass(KernelError, ValueError)


class Shaped:
    """A stand-in for a backend's array: only ``.shape`` and addition, no NumPy protocol."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    @property
    def shape(self) -> tuple[int, ...]:
        return self.array.shape

    def __add__(self, other: "Shaped") -> "Shaped":
        return Shaped(self.array + other.array)


class ShapedKernels(ReferenceKernels):
    """The reference behind arrays that are not NumPy arrays (as a GPU backend's are not)."""

    def forward(self, layer, inputs, weights):
        outs = super().forward(layer, [x.array for x in inputs], weights)
        return [Shaped(o) for o in outs]

    def backward(self, layer, inputs, outputs, out_residuals, weights):
        residuals = super().backward(
            layer,
            [x.array for x in inputs],
            [o.array for o in outputs],
            [r.array for r in out_residuals],
            weights,
        )
        return [Shaped(r) for r in residuals]

    def gradient(self, layer, inputs, out_residuals):
        grads = super().gradient(layer, [x.array for x in inputs], [r.array for r in out_residuals])
        return {name: Shaped(g) for name, g in grads.items()}

    def update(self, layer, weights, grads, batch):
        super().update(layer, weights, {name: g.array for name, g in grads.items()}, batch)


def test_any_array_with_a_shape_passes_the_checks():
    weights, image, out_residual = draws(FAN_OUT, batch=2, seed=16)
    expected = train(FAN_OUT, ReferenceKernels(), copy.deepcopy(weights), image, out_residual)
    result = train(FAN_OUT, ShapedKernels(), weights, Shaped(image), Shaped(out_residual))
    np.testing.assert_array_equal(result.output.array, expected.output)
    np.testing.assert_array_equal(result.input_residual.array, expected.input_residual)


@pytest.mark.parametrize(
    ("image_shape", "residual_shape", "problem"),
    [
        ((2, 5, 4, 3), (2, 2, 2, 3), "image: expected an array of shape [B, 5, 4, 2]"),
        ((5, 4, 2), (2, 2, 2, 3), "image: expected an array of shape [B, 5, 4, 2]"),
        ((2, 5, 4, 2), (3, 2, 2, 3), "out_residual: expected an array of shape [2, 2, 2, 3]"),
    ],
    ids=["image-depth", "image-without-batch", "residual-batch"],
)
def test_a_callers_map_of_the_wrong_shape_is_not_blamed_on_the_kernels(
    image_shape, residual_shape, problem
):
    weights, _, _ = draws(FAN_OUT, batch=2, seed=17)
    with pytest.raises(ValueError) as excinfo:
        train(FAN_OUT, ReferenceKernels(), weights, np.zeros(image_shape), np.zeros(residual_shape))
    assert not isinstance(excinfo.value, KernelError)
    assert str(excinfo.value).startswith(problem)
