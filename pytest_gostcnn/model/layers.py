"""The nine typical layer types (section 6, standard.md §4): parameters, shapes, weights, MACs.

What a layer computes lives in ``reference/<type>.py`` and each backend's kernels. Shapes are
per image, ``(X, Y, L)``; a fully connected layer's output is the map ``(1, 1, F)``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

Shape = tuple[int, int, int]
T = TypeVar("T")


class LayerShapeError(ValueError):
    """A layer's parameters do not fit its input maps."""


@dataclass(frozen=True)
class MapRef:
    """One feature map of a network: output ``output`` (0 or 1) of row ``layer``.

    ``layer == 0`` is the network input, the input map of the first row (standard.md §5). A table
    names a map by its producer's row, so its name is ``Layer.output_name``.
    """

    layer: int
    output: int = 0


NETWORK_INPUT = MapRef(0)


def output_size(size: int, window: int, stride: int, pad: int) -> int:
    """standard.md §4: ``floor((X + 2*P - R) / S) + 1``, the size the Appendix A loops imply."""
    return (size + 2 * pad - window) // stride + 1


def _windowed(in_shape: Shape, p: Mapping[str, int], channels: int) -> Shape:
    x, y, _ = in_shape
    for axis, size, window, pad in (("X", x, p["Rx"], p["Px"]), ("Y", y, p["Ry"], p["Py"])):
        if window > size + 2 * pad:
            raise LayerShapeError(
                f"window R{axis.lower()}={window} is larger than the padded map "
                f"({axis}={size} + 2*P{axis.lower()}={pad})"
            )
    return (
        output_size(x, p["Rx"], p["S"], p["Px"]),
        output_size(y, p["Ry"], p["S"], p["Py"]),
        channels,
    )


def _same_shapes(in_shapes: tuple[Shape, ...]) -> tuple[Shape, ...]:
    if in_shapes[0] != in_shapes[1]:
        raise LayerShapeError(
            f"inputs must have the same shape, got {in_shapes[0]} and {in_shapes[1]}"
        )
    return (in_shapes[0],)


def _concat(in_shapes: tuple[Shape, ...]) -> tuple[Shape, ...]:
    (x1, y1, l1), (x2, y2, l2) = in_shapes
    if (x1, y1) != (x2, y2):
        raise LayerShapeError(
            f"inputs must have the same width and height, got {x1}x{y1} and {x2}x{y2}"
        )
    return ((x1, y1, l1 + l2),)


def _split(in_shapes: tuple[Shape, ...], p: Mapping[str, int]) -> tuple[Shape, ...]:
    x, y, channels = in_shapes[0]
    if not 0 < p["L1"] < channels:
        raise LayerShapeError(f"L1={p['L1']} must lie in 1..{channels - 1} (input L={channels})")
    return ((x, y, p["L1"]), (x, y, channels - p["L1"]))


def _shuffle(in_shapes: tuple[Shape, ...], p: Mapping[str, int]) -> tuple[Shape, ...]:
    channels = in_shapes[0][2]
    if channels % p["G"]:
        raise LayerShapeError(f"input L={channels} is not divisible by G={p['G']}")
    return in_shapes


@dataclass(frozen=True)
class LayerType:
    """What the standard says of one layer type, apart from its arithmetic.

    ``keeps_inputs`` / ``keeps_outputs``: whether backward or gradient reads the layer's
    IN / OUT maps (Appendix A), so a training forward pass must keep them; only then are
    they given to those steps (``Layer.given_to_backward``, docs/backends.md).
    """

    name: str
    params: tuple[str, ...]
    n_inputs: int
    n_outputs: int
    out_shapes: Callable[[tuple[Shape, ...], Mapping[str, int]], tuple[Shape, ...]]
    weight_shapes: Callable[[tuple[Shape, ...], Mapping[str, int]], dict[str, Shape]] = (
        lambda in_shapes, p: {}
    )
    macs: Callable[[tuple[Shape, ...], tuple[Shape, ...], Mapping[str, int]], int] = (
        lambda in_shapes, out_shapes, p: 0
    )
    # Layers with weights: how many products one output sums (fan-in, the bias aside) and
    # how many one input residual sums (fan-out); the benchmark's weight scale and the
    # error model behind СКОП use them.
    fan_in: Callable[[tuple[Shape, ...], Mapping[str, int]], int] | None = None
    fan_out: Callable[[tuple[Shape, ...], Mapping[str, int]], int] | None = None
    keeps_inputs: bool = False
    keeps_outputs: bool = False


def _conv_macs(ins: tuple[Shape, ...], outs: tuple[Shape, ...], p: Mapping[str, int]) -> int:
    x, y, f = outs[0]
    return x * y * f * p["Rx"] * p["Ry"] * ins[0][2]


def _depthwise_macs(ins: tuple[Shape, ...], outs: tuple[Shape, ...], p: Mapping[str, int]) -> int:
    x, y, channels = outs[0]
    return x * y * channels * p["Rx"] * p["Ry"]


def _fc_macs(ins: tuple[Shape, ...], outs: tuple[Shape, ...], p: Mapping[str, int]) -> int:
    x, y, channels = ins[0]
    return p["F"] * channels * x * y


def window_overlap(p: Mapping[str, int]) -> int:
    """The most windows that share one input position: ceil(Rx/S) * ceil(Ry/S)."""
    return -(-p["Rx"] // p["S"]) * -(-p["Ry"] // p["S"])


_WINDOW = ("Rx", "Ry", "S", "Px", "Py")

LAYER_TYPES: dict[str, LayerType] = {
    t.name: t
    for t in (
        LayerType(  # section 6.1
            name="conv",
            params=("F", *_WINDOW),
            n_inputs=1,
            n_outputs=1,
            out_shapes=lambda ins, p: (_windowed(ins[0], p, p["F"]),),
            weight_shapes=lambda ins, p: {
                "filters": (p["Rx"], p["Ry"], ins[0][2], p["F"]),
                "biases": (p["F"],),
            },
            macs=_conv_macs,
            fan_in=lambda ins, p: p["Rx"] * p["Ry"] * ins[0][2],
            fan_out=lambda ins, p: window_overlap(p) * p["F"],
            keeps_inputs=True,
        ),
        LayerType(  # section 6.2
            name="maxpool",
            params=_WINDOW,
            n_inputs=1,
            n_outputs=1,
            out_shapes=lambda ins, p: (_windowed(ins[0], p, ins[0][2]),),
            keeps_inputs=True,
            keeps_outputs=True,
        ),
        LayerType(  # section 6.2
            name="avgpool",
            params=_WINDOW,
            n_inputs=1,
            n_outputs=1,
            out_shapes=lambda ins, p: (_windowed(ins[0], p, ins[0][2]),),
        ),
        LayerType(  # section 6.3
            name="relu",
            params=(),
            n_inputs=1,
            n_outputs=1,
            out_shapes=lambda ins, p: ins,
            keeps_inputs=True,
        ),
        LayerType(  # section 6.4
            name="concat",
            params=(),
            n_inputs=2,
            n_outputs=1,
            out_shapes=lambda ins, p: _concat(ins),
        ),
        LayerType(  # section 6.5
            name="split",
            params=("L1",),
            n_inputs=1,
            n_outputs=2,
            out_shapes=_split,
        ),
        LayerType(  # section 6.6
            name="depthwise",
            params=_WINDOW,
            n_inputs=1,
            n_outputs=1,
            out_shapes=lambda ins, p: (_windowed(ins[0], p, ins[0][2]),),
            # standard.md §4 gap: Appendix A declares BIASES[F]; the layer has L biases.
            weight_shapes=lambda ins, p: {
                "filters": (p["Rx"], p["Ry"], ins[0][2]),
                "biases": (ins[0][2],),
            },
            macs=_depthwise_macs,
            fan_in=lambda ins, p: p["Rx"] * p["Ry"],
            fan_out=lambda ins, p: window_overlap(p),
            keeps_inputs=True,
        ),
        LayerType(  # section 6.7
            name="eltwise",
            params=(),
            n_inputs=2,
            n_outputs=1,
            out_shapes=lambda ins, p: _same_shapes(ins),
        ),
        LayerType(  # section 6.8
            name="fc",
            params=("F",),
            n_inputs=1,
            n_outputs=1,
            out_shapes=lambda ins, p: ((1, 1, p["F"]),),
            # standard.md §4: WEIGHTS[F][L][X][Y], not the map's (X, Y, L) order.
            weight_shapes=lambda ins, p: {
                "weights": (p["F"], ins[0][2], ins[0][0], ins[0][1]),
                "biases": (p["F"],),
            },
            macs=_fc_macs,
            fan_in=lambda ins, p: ins[0][0] * ins[0][1] * ins[0][2],
            fan_out=lambda ins, p: p["F"],
            keeps_inputs=True,
        ),
        LayerType(  # section 6.9
            name="shuffle",
            params=("G",),
            n_inputs=1,
            n_outputs=1,
            out_shapes=_shuffle,
        ),
    )
}

# Parameters that are sizes or counts must be positive; paddings may be zero.
NON_NEGATIVE_PARAMS = frozenset({"Px", "Py"})


@dataclass(frozen=True)
class Layer:
    """One row of a network table, with every shape inferred."""

    number: int
    type: LayerType
    params: Mapping[str, int]
    inputs: tuple[MapRef, ...]
    in_shapes: tuple[Shape, ...]
    out_shapes: tuple[Shape, ...]
    weight_shapes: Mapping[str, Shape]

    @property
    def outputs(self) -> tuple[MapRef, ...]:
        return tuple(MapRef(self.number, i) for i in range(self.type.n_outputs))

    @property
    def has_weights(self) -> bool:
        return bool(self.weight_shapes)

    @property
    def macs(self) -> int:
        """Multiply-accumulates of one forward pass for one image (standard.md §7)."""
        return self.type.macs(self.in_shapes, self.out_shapes, self.params)

    @property
    def fan_in(self) -> int:
        """Products summed into one output (a layer with weights), the bias aside."""
        return self._fanned("fan_in")(self.in_shapes, self.params)

    @property
    def fan_out(self) -> int:
        """Products summed into one input residual (a layer with weights)."""
        return self._fanned("fan_out")(self.in_shapes, self.params)

    def _fanned(self, which: str) -> Callable[[tuple[Shape, ...], Mapping[str, int]], int]:
        count = getattr(self.type, which)
        if count is None:
            raise LayerShapeError(f"layer type {self.type.name!r} declares no {which}")
        return count

    def given_to_backward(
        self, inputs: Sequence[T], outputs: Sequence[T]
    ) -> tuple[list[T], list[T]]:
        """Of this row's IN and OUT maps, those its backward and gradient steps are given:
        what Appendix A reads (``keeps_inputs`` / ``keeps_outputs``), else an empty list."""
        return (
            list(inputs) if self.type.keeps_inputs else [],
            list(outputs) if self.type.keeps_outputs else [],
        )

    def output_name(self, index: int) -> str:
        """How a table names output ``index``: ``n`` for one output, ``n.1``/``n.2`` for split."""
        if self.type.n_outputs == 1:
            return str(self.number)
        return f"{self.number}.{index + 1}"


def make_layer(
    type_name: str,
    in_shapes: tuple[Shape, ...] | list[Shape],
    number: int = 1,
    inputs: tuple[MapRef, ...] | None = None,
    **params: int,
) -> Layer:
    """Build a layer from its type, input shapes and parameters, checking that they fit.

    Raises ``KeyError`` for an unknown type and ``LayerShapeError`` for parameters that
    are missing, extra, non-positive, or do not fit the input shapes.
    """
    layer_type = LAYER_TYPES[type_name]
    in_shapes = tuple(tuple(s) for s in in_shapes)
    missing = [name for name in layer_type.params if name not in params]
    extra = [name for name in params if name not in layer_type.params]
    if missing or extra:
        problems = []
        if missing:
            problems.append("missing parameter(s) " + ", ".join(missing))
        if extra:
            problems.append("unexpected parameter(s) " + ", ".join(extra))
        expected = ", ".join(layer_type.params) or "none"
        raise LayerShapeError(f"{'; '.join(problems)} (a {type_name} layer takes: {expected})")
    for name, value in params.items():
        if isinstance(value, bool) or not isinstance(value, int):
            raise LayerShapeError(f"parameter {name}={value!r} must be an integer")
        floor = 0 if name in NON_NEGATIVE_PARAMS else 1
        if value < floor:
            kind = "non-negative" if floor == 0 else "positive"
            raise LayerShapeError(f"parameter {name}={value} must be {kind}")
    if len(in_shapes) != layer_type.n_inputs:
        raise LayerShapeError(
            f"a {type_name} layer takes {layer_type.n_inputs} input(s), got {len(in_shapes)}"
        )
    out_shapes = layer_type.out_shapes(in_shapes, params)
    if inputs is None:
        inputs = tuple(NETWORK_INPUT for _ in in_shapes)
    return Layer(
        number=number,
        type=layer_type,
        params=dict(params),
        inputs=inputs,
        in_shapes=in_shapes,
        out_shapes=tuple(out_shapes),
        weight_shapes=layer_type.weight_shapes(in_shapes, params),
    )
