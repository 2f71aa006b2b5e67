"""pytest-gostcnn: conformance and benchmark suite for GOST R 57700.36-2021.

The public names of the Python API (docs/api.md): the tables, the executor, Table 1's
counts and section 8's draws. Layout: docs/architecture.md.
"""

import importlib.util
from pathlib import Path

from .model import executor
from .model.complexity import inference_macs, training_macs
from .model.data import draw_input, draw_out_residual, draw_weights
from .model.layers import LAYER_TYPES, Layer, LayerShapeError, make_layer
from .model.network import Network, TableError
from .model.table_files import load_network, load_networks, load_table


def _check_layout() -> None:
    """reference/ and backends/ sit at the repository root and install inside this package
    (docs/architecture.md): a checkout that is not installed has neither, and one whose
    install maps another tree's would run that tree's code; both are one clear error."""
    here = Path(__file__).resolve().parent
    for name in ("reference", "backends"):
        spec = importlib.util.find_spec(f"{__name__}.{name}")
        if spec is None or spec.origin is None:
            raise ImportError(
                f"{__name__}.{name} is missing: {here} is a source checkout that is not "
                f"installed; install it (pip install -e {here.parent}), which maps {name}/ "
                "into the package"
            )
        found = Path(spec.origin).resolve().parent
        if found not in (here / name, here.parent / name):
            raise ImportError(
                f"{__name__}.{name} comes from {found}, not from beside {here}: the installed "
                f"pytest-gostcnn is another tree; install this one (pip install -e {here.parent})"
            )


_check_layout()

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
