"""The single layers the conformance suite verifies every backend on.

Two kinds: small edge cases (strides, paddings, windows that drop a column, global
pooling, ties, every split point; ``layer_cases``), and every distinct layer of the
selected networks at its own shape (``network_cases``), as the networks run them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from pytest_gostcnn.model.data import INPUT_RANGE
from pytest_gostcnn.model.layers import Layer, make_layer
from pytest_gostcnn.model.network import Network


@dataclass(frozen=True)
class LayerCase:
    """One layer to verify; ``tag`` names its shape in test ids (ASCII).

    ``rows`` names the network rows a network-shape case stands for, e.g. ("R1",); it is
    empty for the small edge cases. A ``saturating`` case is an integer type's only: its
    output's scale leaves a share of the values past the range (``fixed_point``).
    """

    tag: str
    layer: Layer
    draw: str = "uniform"
    rows: tuple[str, ...] = ()
    saturating: bool = False

    @property
    def network_shape(self) -> bool:
        return bool(self.rows)

    def draw_input(self, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        if self.draw == "ties":
            return rng.integers(-2, 3, size=shape).astype(np.float64)
        if self.draw == "negative":
            return rng.uniform(INPUT_RANGE[0], 0.0, size=shape)
        return rng.uniform(*INPUT_RANGE, size=shape)


def _window_tag(p: Mapping[str, int]) -> str:
    kernel = f"{p['Rx']}" if p["Rx"] == p["Ry"] else f"{p['Rx']}x{p['Ry']}"
    pad = f"{p['Px']}" if p["Px"] == p["Py"] else f"{p['Px']}x{p['Py']}"
    return f"k{kernel}s{p['S']}p{pad}"


def _windowed(type_name: str, shape: tuple[int, int, int], draw: str = "uniform", **p: int):
    layer = make_layer(type_name, [shape], **p)
    tag = _window_tag(p) + ("" if draw == "uniform" else f"-{draw}")
    return LayerCase(tag, layer, draw)


def _window(r: int, s: int, pad: int) -> dict[str, int]:
    return {"Rx": r, "Ry": r, "S": s, "Px": pad, "Py": pad}


MAP = (9, 7, 4)


def layer_cases() -> list[LayerCase]:
    """Every case, in a stable order (their ids are test ids).

    Stride 1/2/3, zero and non-zero padding, Px != Py and Rx != Ry, a window that drops the
    last column, a global pooling window, max pooling with exact ties and with all-negative
    windows (so the padding's 0 wins), FC on a map with X, Y > 1, every split point of a
    small map, shuffle with G = 2, 3, 4. Section 8 draws inputs from U(-127, 128); two cases
    draw otherwise on purpose: ``ties`` (integers from -2 to 2: exact ties and zeros) and
    ``negative`` (U(-127, 0): only the padding's 0 can be a window's maximum).
    """
    cases = []
    for window in (
        _window(3, 1, 1),
        _window(3, 2, 1),
        _window(1, 1, 0),
        _window(5, 3, 2),
        _window(2, 2, 0),
        {"Rx": 3, "Ry": 2, "S": 1, "Px": 1, "Py": 0},
    ):
        cases.append(_windowed("conv", MAP, F=6, **window))
    for window in (_window(3, 1, 1), _window(3, 2, 1), _window(5, 3, 2), _window(3, 2, 0)):
        cases.append(_windowed("depthwise", MAP, **window))
    for window in (
        _window(3, 2, 1),
        _window(2, 2, 0),
        {"Rx": 3, "Ry": 2, "S": 1, "Px": 1, "Py": 0},
    ):
        cases.append(_windowed("maxpool", MAP, **window))
        cases.append(_windowed("avgpool", MAP, **window))
    cases.append(_windowed("maxpool", MAP, "ties", **_window(3, 1, 1)))
    cases.append(_windowed("maxpool", MAP, "negative", **_window(3, 2, 1)))
    # Global pooling: the window is the whole map (note 3 of section 6.2).
    for type_name in ("maxpool", "avgpool"):
        layer = make_layer(type_name, [(5, 4, 6)], Rx=5, Ry=4, S=1, Px=0, Py=0)
        cases.append(LayerCase("global5x4", layer))
    cases.append(LayerCase("uniform", make_layer("relu", [MAP])))
    cases.append(LayerCase("ties", make_layer("relu", [MAP]), "ties"))
    cases.append(LayerCase("L3+5", make_layer("concat", [(5, 4, 3), (5, 4, 5)])))
    for first in (1, 2, 4):
        cases.append(LayerCase(f"L1-{first}of5", make_layer("split", [(5, 4, 5)], L1=first)))
    cases.append(LayerCase("5x4x3", make_layer("eltwise", [(5, 4, 3), (5, 4, 3)])))
    cases.append(LayerCase("3x2x4-F5", make_layer("fc", [(3, 2, 4)], F=5)))
    cases.append(LayerCase("1x1x6-F4", make_layer("fc", [(1, 1, 6)], F=4)))
    for groups in (2, 3, 4):
        cases.append(LayerCase(f"G{groups}", make_layer("shuffle", [(4, 3, 12)], G=groups)))
    return cases


def saturating_cases() -> list[LayerCase]:
    """An integer type's clamp (standard.md §6, "Integer inference"): one case of each
    layer type that requantises, its output's scale too small for about a tenth of its
    values. Section 8's own scales leave no reference value past a range, so without
    these nothing would show a backend that wraps around instead of saturating."""
    shapes = {
        "conv": ([MAP], {"F": 6, **_window(3, 1, 1)}),
        "depthwise": ([MAP], _window(3, 1, 1)),
        "avgpool": ([MAP], _window(3, 2, 1)),
        "eltwise": ([(5, 4, 3), (5, 4, 3)], {}),
        "fc": ([(3, 2, 4)], {"F": 5}),
    }
    cases = []
    for type_name, (in_shapes, params) in shapes.items():
        layer = make_layer(type_name, in_shapes, **params)
        tag = _window_tag(params) if "Rx" in params else _shape_tag(layer)
        cases.append(LayerCase(f"{tag}-saturating", layer, saturating=True))
    return cases


def _shape_tag(layer: Layer) -> str:
    """The input shapes and parameters of a layer, e.g. ``224x224x3-k7s2p3-F32``."""
    shapes = "+".join("x".join(str(n) for n in shape) for shape in layer.in_shapes)
    p = layer.params
    parts = [shapes]
    if "Rx" in p:
        parts.append(_window_tag(p))
    parts += [f"{name}{p[name]}" for name in ("F", "L1", "G") if name in p]
    return "-".join(parts)


def _rows_tag(rows: list[tuple[str, int]]) -> str:
    """Rows by network, e.g. ``M16+G14.26.28+V13.15``: every row the case stands for."""
    by_network: dict[str, list[int]] = {}
    for latin, number in rows:
        by_network.setdefault(latin, []).append(number)
    return "+".join(latin + ".".join(map(str, numbers)) for latin, numbers in by_network.items())


def network_cases(networks: Mapping[str, Network]) -> list[LayerCase]:
    """Every distinct layer of ``networks`` (type, parameters, input shapes) at its shape.

    A configuration that several rows share is one case, verified on the first row's layer
    and named after all of them; the order follows the networks and their rows.
    """
    rows: dict[tuple, list[tuple[str, int]]] = {}
    first: dict[tuple, Layer] = {}
    for latin, network in networks.items():
        for layer in network.layers:
            key = (layer.type.name, tuple(sorted(layer.params.items())), layer.in_shapes)
            first.setdefault(key, layer)
            rows.setdefault(key, []).append((latin, layer.number))
    return [
        LayerCase(
            f"{_rows_tag(rows[key])}-{_shape_tag(layer)}",
            layer,
            rows=tuple(f"{latin}{number}" for latin, number in rows[key]),
        )
        for key, layer in first.items()
    ]
