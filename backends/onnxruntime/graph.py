"""The standard's layers as ONNX nodes, and whole networks as ONNX models (opset 17).

Inside a graph a map is ONNX's NCHW with H = X and W = Y, [B][L][X][Y]; the graph's inputs
and outputs keep the standard's [B][X][Y][L] (docs/standard.md §2), one Transpose at each
end. Where ONNX's operators differ from the standard (docs/standard.md §4):

- max pooling pads with 0, not -inf: an explicit zero Pad before an unpadded MaxPool;
- average pooling divides by Rx*Ry always: ``count_include_pad=1`` (an explicit Pad where
  the padding is as large as the window, which ONNX's pooling refuses);
- fully connected: the NCHW map flattened is in (l, x, y) order, WEIGHTS' own, so FC is
  Flatten, Gemm and two Unsqueezes back to a 1x1xF map;
- shuffle: Reshape to [B][G][L/G][X][Y], Transpose, Reshape back;
- split and concat by channel (axis 1); depthwise convolution is a Conv with group = L.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from pytest_gostcnn.model.layers import Layer
from pytest_gostcnn.model.network import Network, table_checksum

OPSET = 17  # Split's and Unsqueeze's sizes as inputs (13), widely run by providers
IR_VERSION = 8  # the IR of opset 17, so older runtimes and compilers read the file
ELEMENT_TYPES = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16}
NUMPY_TYPES = {"float32": np.float32, "float16": np.float16}
TO_NCHW = (0, 3, 1, 2)  # [B][X][Y][L] -> [B][L][X][Y]
TO_MAP = (0, 2, 3, 1)  # and back
INPUT, OUTPUT = "input", "output"


class ExportError(ValueError):
    """A table row ONNX cannot express; the message names the row."""


def weight_layout(layer: Layer, name: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """How a weight array in the standard's layout becomes ONNX's: a transpose, then a shape.

    Convolution FILTERS [Rx][Ry][L][F] -> W [F][L][Rx][Ry]; depthwise FILTERS [Rx][Ry][L] ->
    W [L][1][Rx][Ry] (group = L); FC WEIGHTS [F][L][X][Y] -> [F][L*X*Y], the (l, x, y)
    order of the flattened NCHW map; biases as they are.
    """
    shape = tuple(layer.weight_shapes[name])
    kind = layer.type.name
    if name == "filters" and kind == "conv":
        rx, ry, channels, features = shape
        return (3, 2, 0, 1), (features, channels, rx, ry)
    if name == "filters" and kind == "depthwise":
        rx, ry, channels = shape
        return (2, 0, 1), (channels, 1, rx, ry)
    if name == "weights":
        return (0, 1, 2, 3), (shape[0], int(np.prod(shape[1:])))
    return tuple(range(len(shape))), shape


def onnx_weight(layer: Layer, name: str, array: np.ndarray) -> np.ndarray:
    """A weight array in ONNX's layout (``weight_layout``), C-ordered."""
    perm, shape = weight_layout(layer, name)
    return np.ascontiguousarray(np.transpose(array, perm).reshape(shape))


class Graph:
    """Nodes and initializers of one graph being built; names made unique by a counter."""

    def __init__(self, dtype: str) -> None:
        self.dtype = dtype
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._count = 0

    def name(self, stem: str) -> str:
        self._count += 1
        return f"{stem}_{self._count}"

    def constant(self, stem: str, values) -> str:
        """An int64 initializer (shapes, pads, sizes)."""
        name = self.name(stem)
        self.initializers.append(numpy_helper.from_array(np.asarray(values, np.int64), name))
        return name

    def node(self, op: str, inputs: list[str], stem: str, outputs: int = 1, **attrs) -> list[str]:
        names = [self.name(stem) for _ in range(outputs)]
        self.nodes.append(helper.make_node(op, inputs, names, name=self.name(op), **attrs))
        return names

    def to_onnx_layout(self, layer: Layer, name: str, standard: str) -> str:
        """Nodes turning the weight ``standard`` (the standard's layout) into ONNX's."""
        perm, shape = weight_layout(layer, name)
        moved = standard
        if perm != tuple(range(len(perm))):
            moved = self.node("Transpose", [standard], f"{name}_t", perm=list(perm))[0]
        if len(shape) != len(perm):
            moved = self.node("Reshape", [moved, self.constant("shape", shape)], name)[0]
        return moved


def _window(layer: Layer) -> dict:
    p = layer.params
    return {"kernel_shape": [p["Rx"], p["Ry"]], "strides": [p["S"], p["S"]]}


def _pads(layer: Layer) -> list[int]:
    p = layer.params
    return [p["Px"], p["Py"], p["Px"], p["Py"]]  # begin X, Y; end X, Y (H = X, W = Y)


def _zero_pad(g: Graph, layer: Layer, x: str) -> str:
    """``x`` with Px / Py zero rows and columns on each side (docs/standard.md §4)."""
    p = layer.params
    if p["Px"] == p["Py"] == 0:
        return x
    pads = g.constant("pads", [0, 0, p["Px"], p["Py"], 0, 0, p["Px"], p["Py"]])
    return g.node("Pad", [x, pads], "padded", mode="constant")[0]


def _conv(g: Graph, layer: Layer, inputs: list[str], w: Mapping[str, str]) -> list[str]:
    group = layer.in_shapes[0][2] if layer.type.name == "depthwise" else 1
    operands = [inputs[0], w["filters"], w["biases"]]
    return g.node("Conv", operands, "conv", pads=_pads(layer), group=group, **_window(layer))


def _maxpool(g: Graph, layer: Layer, inputs: list[str], w: Mapping[str, str]) -> list[str]:
    return g.node("MaxPool", [_zero_pad(g, layer, inputs[0])], "maxpool", **_window(layer))


def _avgpool(g: Graph, layer: Layer, inputs: list[str], w: Mapping[str, str]) -> list[str]:
    p = layer.params
    if p["Px"] < p["Rx"] and p["Py"] < p["Ry"]:
        attrs = {"pads": _pads(layer), "count_include_pad": 1}
        return g.node("AveragePool", inputs[:1], "avgpool", **attrs, **_window(layer))
    return g.node("AveragePool", [_zero_pad(g, layer, inputs[0])], "avgpool", **_window(layer))


def _relu(g: Graph, layer: Layer, inputs: list[str], w: Mapping[str, str]) -> list[str]:
    return g.node("Relu", inputs, "relu")


def _concat(g: Graph, layer: Layer, inputs: list[str], w: Mapping[str, str]) -> list[str]:
    return g.node("Concat", inputs, "concat", axis=1)


def _split(g: Graph, layer: Layer, inputs: list[str], w: Mapping[str, str]) -> list[str]:
    first = layer.params["L1"]
    sizes = g.constant("sizes", [first, layer.in_shapes[0][2] - first])
    return g.node("Split", [inputs[0], sizes], "split", outputs=2, axis=1)


def _eltwise(g: Graph, layer: Layer, inputs: list[str], w: Mapping[str, str]) -> list[str]:
    return g.node("Add", inputs, "sum")


def _fc(g: Graph, layer: Layer, inputs: list[str], w: Mapping[str, str]) -> list[str]:
    rows = g.node("Flatten", inputs, "rows", axis=1)[0]  # [B][L*X*Y], (l, x, y) order
    out = g.node("Gemm", [rows, w["weights"], w["biases"]], "fc", transB=1)[0]
    return g.node("Unsqueeze", [out, g.constant("axes", [2, 3])], "fc_map")  # [B][F][1][1]


def _shuffle(g: Graph, layer: Layer, inputs: list[str], w: Mapping[str, str]) -> list[str]:
    # Channel l = g*(L/G) + j goes to f = j*G + g (Appendix A's l/(L/G) + G*(l%(L/G))).
    x, y, channels = layer.in_shapes[0]
    groups = layer.params["G"]
    grid = g.constant("shape", [-1, groups, channels // groups, x, y])
    viewed = g.node("Reshape", [inputs[0], grid], "groups")[0]
    moved = g.node("Transpose", [viewed], "shuffled", perm=[0, 2, 1, 3, 4])[0]
    return g.node("Reshape", [moved, g.constant("shape", [-1, channels, x, y])], "shuffle")


EMITTERS = {
    "conv": _conv,
    "depthwise": _conv,
    "maxpool": _maxpool,
    "avgpool": _avgpool,
    "relu": _relu,
    "concat": _concat,
    "split": _split,
    "eltwise": _eltwise,
    "fc": _fc,
    "shuffle": _shuffle,
}


def layer_nodes(g: Graph, layer: Layer, inputs: list[str], weights: Mapping[str, str]) -> list[str]:
    """``layer``'s nodes in ``g``: NCHW maps ``inputs``, weights in ONNX's layout; its
    NCHW outputs."""
    emit = EMITTERS.get(layer.type.name)
    if emit is None:
        raise ExportError(
            f"row {layer.number} ({layer.type.name}): no ONNX expression for this layer type "
            f"(the export knows {', '.join(EMITTERS)})"
        )
    return emit(g, layer, inputs, weights)


def _tensor(name: str, dtype: str, shape: tuple[int, ...]) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, ELEMENT_TYPES[dtype], list(shape))


def _model(g: Graph, inputs: list, outputs: list, name: str, doc: str) -> onnx.ModelProto:
    graph = helper.make_graph(g.nodes, name, inputs, outputs, g.initializers, doc_string=doc)
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="pytest-gostcnn",
        ir_version=IR_VERSION,
    )
    onnx.checker.check_model(model)
    return model


def layer_model(layer: Layer, batch: int, dtype: str = "float32") -> onnx.ModelProto:
    """One layer's forward as a model: inputs ``in1``, ``in2`` ([B][X][Y][L]) and its weights
    by name in the standard's layout; outputs ``out1``, ``out2``."""
    g = Graph(dtype)
    inputs = [_tensor(f"in{i + 1}", dtype, (batch, *s)) for i, s in enumerate(layer.in_shapes)]
    inputs += [_tensor(name, dtype, s) for name, s in layer.weight_shapes.items()]
    maps = [
        g.node("Transpose", [f"in{i + 1}"], "nchw", perm=list(TO_NCHW))[0]
        for i in range(len(layer.in_shapes))
    ]
    weights = {name: g.to_onnx_layout(layer, name, name) for name in layer.weight_shapes}
    outs = layer_nodes(g, layer, maps, weights)
    outputs = []
    for i, (out, shape) in enumerate(zip(outs, layer.out_shapes, strict=True)):
        g.nodes.append(helper.make_node("Transpose", [out], [f"out{i + 1}"], perm=list(TO_MAP)))
        outputs.append(_tensor(f"out{i + 1}", dtype, (batch, *shape)))
    return _model(g, inputs, outputs, f"row{layer.number}_{layer.type.name}", "")


def weight_name(number: int, name: str) -> str:
    """The initializer of row ``number``'s weight array ``name``, in ONNX's layout."""
    return f"row{number}.{name}"


def network_model(
    network: Network,
    weights: Mapping[int, Mapping[str, np.ndarray]],
    batch: int,
    dtype: str = "float32",
    doc: str = "",
    props: Mapping[str, str] | None = None,
) -> onnx.ModelProto:
    """The network's forward at ``batch`` as one model: ``input`` [B][X][Y][L] to ``output``
    [B][X][Y][F], ``weights`` (the standard's layout, any float type) as initializers in
    ONNX's layout and in ``dtype``, named ``row<n>.<name>``; ``props``: more metadata."""
    g = Graph(dtype)
    maps = {
        network.layers[0].inputs[0]: g.node("Transpose", [INPUT], "nchw", perm=list(TO_NCHW))[0]
    }
    for layer in network.layers:
        names = {}
        for name in layer.weight_shapes:
            names[name] = weight_name(layer.number, name)
            array = onnx_weight(layer, name, weights[layer.number][name])
            g.initializers.append(
                numpy_helper.from_array(array.astype(NUMPY_TYPES[dtype]), names[name])
            )
        outs = layer_nodes(g, layer, [maps[ref] for ref in layer.inputs], names)
        maps.update(zip(layer.outputs, outs, strict=True))
    last = maps[network.layers[-1].outputs[0]]
    g.nodes.append(helper.make_node("Transpose", [last], [OUTPUT], perm=list(TO_MAP)))
    model = _model(
        g,
        [_tensor(INPUT, dtype, (batch, *network.input_shape))],
        [_tensor(OUTPUT, dtype, (batch, *network.output_shape))],
        f"{network.latin}: {network.name}",
        doc,
    )
    helper.set_model_props(
        model,
        {
            "gost.network": network.letter,
            "gost.name": network.name,
            "gost.provenance": network.provenance,
            "gost.table_checksum": table_checksum(network),
            "gost.batch": str(batch),
            "gost.layout": "input and output [B][X][Y][L]; inside, NCHW with H = X, W = Y",
            **(props or {}),
        },
    )
    return model
