"""README promises that code can check: its Python example runs, its Table 1 is computed."""

import re
from pathlib import Path

from pytest_gostcnn.model.complexity import inference_macs, training_macs

README = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")


def test_readme_python_example_runs():
    blocks = re.findall(r"```python\n(.*?)```", README, flags=re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})


def test_readme_table_1_matches_the_shipped_tables(shipped_networks):
    rows = re.findall(r"^\| \S+ \((\w+)\) \| (\d+) \| ([\d.]+) \| ([\d.]+) \|$", README, flags=re.M)
    assert [latin for latin, *_ in rows] == list(shipped_networks)
    for latin, layers, inference, training in rows:
        network = shipped_networks[latin]
        assert int(layers) == len(network.layers)
        assert inference == f"{inference_macs(network) / 1e9:.4f}"
        assert training == f"{training_macs(network) / 1e9:.4f}"
