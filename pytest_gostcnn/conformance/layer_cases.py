"""The single-layer shapes the conformance suite verifies every backend on.

They cover the edge cases of the literal-oracle tests (strides, paddings, windows that
drop a column, global pooling, ties, every split point); see ``layer_cases``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pytest_gostcnn.model.data import INPUT_RANGE
from pytest_gostcnn.model.layers import Layer, make_layer


@dataclass(frozen=True)
class LayerCase:
    """One layer to verify; ``tag`` names its shape in test ids (ASCII)."""

    tag: str
    layer: Layer
    draw: str = "uniform"

    def draw_input(self, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        if self.draw == "ties":
            return rng.integers(-2, 3, size=shape).astype(np.float64)
        if self.draw == "negative":
            return rng.uniform(INPUT_RANGE[0], 0.0, size=shape)
        return rng.uniform(*INPUT_RANGE, size=shape)


def _window_tag(p: dict[str, int]) -> str:
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
