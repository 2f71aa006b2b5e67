"""README and docs promises that code can check: the Python example runs, Table 1 is
computed, the options page lists every option as the plugin declares it."""

import re
from pathlib import Path

from pytest_gostcnn.model.complexity import inference_macs, training_macs
from pytest_gostcnn.plugin.options import OPTIONS

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


def test_options_page_has_every_option_with_its_help():
    page = (Path(__file__).parent.parent / "docs" / "options.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(--gost-[\w-]+)(?:=([^`]+))?` \| (.*?) \|", page, flags=re.M)
    assert [(flag, metavar, text) for flag, metavar, text in rows] == [
        (option.flag, option.metavar, option.help) for option in OPTIONS
    ]
