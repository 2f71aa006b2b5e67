"""The pytest plugin (entry point ``pytest11: gostcnn``).

For now it names the network tables in pytest's header; the backend options and the
conformance and benchmark items build on this module.
"""

from __future__ import annotations

from .network import TableError, load_networks


def pytest_report_header() -> str:
    try:
        networks = load_networks()
    except TableError as exc:
        return f"gostcnn: network tables unusable: {exc}"
    listed = ", ".join(f"{n.letter} ({n.latin}, {n.provenance})" for n in networks.values())
    return f"gostcnn: network tables: {listed}"
