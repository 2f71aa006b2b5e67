"""pytest-gostcnn: conformance and benchmark suite for GOST R 57700.36-2021.

The public names of the Python API (docs/api.md): the tables, the executor, Table 1's
counts and section 8's draws. Layout: docs/architecture.md.
"""

from pathlib import Path

from .model import executor
from .model.complexity import inference_macs, training_macs
from .model.data import draw_input, draw_out_residual, draw_weights
from .model.layers import LAYER_TYPES, Layer, LayerShapeError, make_layer
from .model.network import Network, TableError, load_network, load_networks, load_table

# In a source checkout reference/ and backends/ sit beside this package, at the repository
# root (docs/architecture.md); an installed copy holds them inside it. Let the checkout import
# them as pytest_gostcnn.reference / pytest_gostcnn.backends either way.
_checkout = Path(__file__).resolve().parent.parent
if not (Path(__file__).parent / "reference").is_dir() and (_checkout / "reference").is_dir():
    __path__.append(str(_checkout))

__all__ = [
    "LAYER_TYPES",
    "Layer",
    "LayerShapeError",
    "Network",
    "TableError",
    "draw_input",
    "draw_out_residual",
    "draw_weights",
    "executor",
    "inference_macs",
    "load_network",
    "load_networks",
    "load_table",
    "make_layer",
    "training_macs",
]
