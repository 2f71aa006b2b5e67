"""``python -m pytest_gostcnn export --format onnx``: each network of a table set as an ONNX
file at one batch, with the weights section 8 draws for a seed as its initializers.

The draw is the network item's (docs/standard.md §6): ``default_rng(seed)``, the weights by
the reading, then the input; ``test_network[<net>-inference-B<batch>]`` with that seed and
reading verifies a provider on these very weights, rounded to float32.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

from pytest_gostcnn.model.data import draw_input, draw_weights
from pytest_gostcnn.model.network import Network

from .graph import network_model

FORMATS = ("onnx",)


def drawn_model(network: Network, batch: int, seed: int, reading: str) -> onnx.ModelProto:
    """The network at ``batch`` with section 8's weights for ``seed`` and ``reading``."""
    weights = draw_weights(network, np.random.default_rng(seed), reading)
    doc = (
        f"GOST R 57700.36-2021 network {network.letter} ({network.latin}), {network.name}; "
        f"weights drawn as section 8 draws them (seed {seed}, reading {reading}); input and "
        "output [B][X][Y][L]"
    )
    props = {"gost.seed": str(seed), "gost.weights": reading}
    model = network_model(network, weights, batch, "float32", doc, props)
    onnx.checker.check_model(model, full_check=True)  # with ONNX's shape inference
    return model


def drawn_input(network: Network, batch: int, seed: int, reading: str) -> np.ndarray:
    """The input section 8 draws after those weights, float32 [B][X][Y][L]."""
    rng = np.random.default_rng(seed)
    draw_weights(network, rng, reading)
    return draw_input(network, batch, rng).astype(np.float32)


def write_models(
    networks: list[Network], folder: Path, batch: int, seed: int, reading: str
) -> list[Path]:
    """``<latin>.onnx`` and its drawn input ``<latin>.input.npy`` for each network."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for network in networks:
        path = folder / f"{network.latin}.onnx"
        onnx.save_model(drawn_model(network, batch, seed, reading), path)
        np.save(folder / f"{network.latin}.input.npy", drawn_input(network, batch, seed, reading))
        written.append(path)
    return written
