"""The reference package as a whole (``reference/``): one module per layer type, kernels that
keep their arguments' dtype, and outputs that do not hold on to their inputs.

What each module computes is checked against the literal Appendix A loops in test_oracle.py.
"""

import numpy as np
import pytest

from pytest_gostcnn.model.layers import LAYER_TYPES, Layer, make_layer
from pytest_gostcnn.reference import MODULES, split

WINDOW = {"Rx": 3, "Ry": 2, "S": 2, "Px": 1, "Py": 1}
MAP = (5, 4, 4)

# One layer of every type on [B][5][4][4] maps, with padding and stride so that every
# window kernel crops and strides.
LAYERS = {
    "conv": make_layer("conv", [MAP], F=3, **WINDOW),
    "maxpool": make_layer("maxpool", [MAP], **WINDOW),
    "avgpool": make_layer("avgpool", [MAP], **WINDOW),
    "relu": make_layer("relu", [MAP]),
    "concat": make_layer("concat", [MAP, MAP]),
    "split": make_layer("split", [MAP], L1=1),
    "depthwise": make_layer("depthwise", [MAP], **WINDOW),
    "eltwise": make_layer("eltwise", [MAP, MAP]),
    "fc": make_layer("fc", [MAP], F=3),
    "shuffle": make_layer("shuffle", [MAP], G=2),
}


def test_every_layer_type_has_a_reference_module():
    assert MODULES.keys() == LAYER_TYPES.keys()
    for name, module in MODULES.items():
        assert callable(module.forward) and callable(module.backward), name


def test_the_sample_layers_cover_every_layer_type():
    assert LAYERS.keys() == LAYER_TYPES.keys()


def every_step(layer: Layer, dtype: type) -> dict[str, np.ndarray]:
    """Forward, backward and (with weights) gradient of ``layer`` on arrays of ``dtype``."""
    rng = np.random.default_rng(57700)
    module = MODULES[layer.type.name]
    inputs = [rng.standard_normal((2, *shape)).astype(dtype) for shape in layer.in_shapes]
    weights = {
        name: rng.standard_normal(shape).astype(dtype)
        for name, shape in layer.weight_shapes.items()
    }
    outputs = module.forward(layer, inputs, weights)
    out_residuals = [rng.standard_normal(o.shape).astype(dtype) for o in outputs]
    arrays = {f"OUT{i + 1}": o for i, o in enumerate(outputs)}
    in_residuals = module.backward(layer, inputs, outputs, out_residuals, weights)
    arrays |= {f"IN{i + 1}_D": r for i, r in enumerate(in_residuals)}
    if layer.has_weights:
        grads = module.gradient(layer, inputs, out_residuals)
        arrays |= {f"{name}_D": g for name, g in grads.items()}
    return arrays


@pytest.mark.parametrize("layer", LAYERS.values(), ids=LAYERS.keys())
def test_every_step_computes_in_the_dtype_of_its_arguments(layer):
    # A float32 backend runs these kernels; the float64 reference is the same code.
    for name, array in every_step(layer, np.float32).items():
        assert array.dtype == np.float32, name


def test_split_outputs_are_copies_not_views_of_the_input():
    # A view would keep the whole input map alive for as long as either half is kept.
    layer = LAYERS["split"]
    inp = np.random.default_rng(1).standard_normal((2, *MAP))
    for output in split.forward(layer, [inp], {}):
        assert not np.shares_memory(output, inp)
        assert output.flags.c_contiguous
