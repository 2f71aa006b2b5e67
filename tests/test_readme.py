"""README and docs promises that code can check: the README stays a short guide, every
relative link resolves, the backend example runs, both Table 1s are computed, the options
page lists every option as the plugin declares it."""

import argparse
import re
import unicodedata

from gost_helpers import REPOSITORY

from pytest_gostcnn.__main__ import _parser
from pytest_gostcnn.backends.onnxruntime import backend as onnxruntime_backend
from pytest_gostcnn.backends.torch import backend as torch_backend
from pytest_gostcnn.model.complexity import inference_macs, training_macs
from pytest_gostcnn.model.layers import LAYER_TYPES
from pytest_gostcnn.model.table_files import load_networks
from pytest_gostcnn.run.option_definitions import OPTIONS

README_PATH = REPOSITORY / "README.md"
DOCS = REPOSITORY / "docs"
BACKENDS = (DOCS / "backends.md").read_text(encoding="utf-8")
TABLES = (DOCS / "tables.md").read_text(encoding="utf-8")
README_LIMIT = 8000  # bytes: the README is a user guide; reference material lives in docs/
# bytes: the docs are a reference, each page one reader's question, not a record of sittings
DOCS_LIMIT, PAGE_LIMIT = 200_000, 30_000
FENCE = re.compile(r"^```.*?^```", flags=re.M | re.S)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _section(text: str, heading: str) -> str:
    """The text under a Markdown heading, up to the next heading of the same or higher level."""
    text = FENCE.sub("", text)
    match = re.search(rf"^(#+) {re.escape(heading)}$", text, flags=re.M)
    assert match, f"no heading {heading!r}"
    end = re.compile(rf"^#{{1,{len(match.group(1))}}} ", flags=re.M).search(text, match.end())
    return text[match.end() : end.start() if end else len(text)]


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    kept = (c for c in heading.strip().lower() if c in " -_" or unicodedata.category(c)[0] in "LN")
    return "".join(kept).replace(" ", "-")


def _anchors(text: str) -> set[str]:
    anchors, seen = set(), {}
    for heading in re.findall(r"^#+ (.+)$", FENCE.sub("", text), flags=re.M):
        anchor = _anchor(heading)
        count = seen.get(anchor, 0)
        seen[anchor] = count + 1
        anchors.add(anchor if count == 0 else f"{anchor}-{count}")
    return anchors


def test_readme_is_at_most_8_kb():
    size = len(README_PATH.read_bytes())
    assert size <= README_LIMIT, f"README.md is {size} bytes, over {README_LIMIT}: move to docs/"


def test_every_relative_link_of_the_readme_and_docs_resolves():
    pages = [README_PATH, *sorted(DOCS.glob("*.md"))]
    broken = []
    for page in pages:
        for target in LINK.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
            if re.match(r"[a-z]+:", target):
                continue  # http(s), mailto: not this repository's
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.is_file():
                broken.append(f"{page.name}: {target} (no file {path})")
            elif anchor and linked.suffix == ".md":
                if anchor not in _anchors(linked.read_text(encoding="utf-8")):
                    broken.append(f"{page.name}: {target} (no heading #{anchor})")
    assert not broken, "\n".join(broken)


def test_backend_guide_python_example_runs():
    blocks = re.findall(r"```python\n(.*?)```", BACKENDS, flags=re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, "docs/backends.md", "exec"), {})


def test_backend_guide_names_the_maps_backward_is_given():
    given = re.search(r"IN for (.+?); OUT for (.+?)\. ", " ".join(BACKENDS.split()))
    assert given, "docs/backends.md no longer says which maps backward is given"
    named = [set(re.findall(r"`(\w+)`", group)) for group in given.groups()]
    assert named == [
        {name for name, t in LAYER_TYPES.items() if t.keeps_inputs},
        {name for name, t in LAYER_TYPES.items() if t.keeps_outputs},
    ]


def test_backend_guide_gives_each_shipped_backends_reason_when_its_library_is_missing():
    said = " ".join(BACKENDS.split())  # the guide wraps its lines
    for hint in (torch_backend.INSTALL_HINT, onnxruntime_backend.INSTALL_HINT):
        assert f"`{hint}`" in said, hint


def test_table_1_matches_the_shipped_tables(shipped_networks):
    table = _section(TABLES, "Table 1 of the reconstructions")
    rows = re.findall(r"^\| \S+ \((\w+)\) \| (\d+) \| ([\d.]+) \| ([\d.]+) \|$", table, flags=re.M)
    assert [latin for latin, *_ in rows] == list(shipped_networks)
    for latin, layers, inference, training in rows:
        network = shipped_networks[latin]
        assert int(layers) == len(network.layers)
        assert inference == f"{inference_macs(network) / 1e9:.4f}"
        assert training == f"{training_macs(network) / 1e9:.4f}"


CANONICAL_ROW = r"^\| \S+ \((\w+)\) \| (\d+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| .+ \|$"
CANONICAL_TABLE = _section(TABLES, "Table 1 of the canonical set")
PUBLISHED_TOLERANCE = 0.02
# Г: the paper's Table 1 gives its first row (7x7/2 convolution, 64 filters, 3-channel
# image, 112x112 outputs) 34M operations where that shape makes 112*112*64*7*7*3; the
# tables page says so, and the rest of the network is held against the rest of the paper's sum.
G_FIRST_ROW_PAPER = 34e6
G_FIRST_ROW_SHAPE = 112 * 112 * 64 * 7 * 7 * 3


def test_table_1_of_the_canonical_set_matches_its_tables():
    canonical = load_networks("canonical")
    rows = re.findall(CANONICAL_ROW, CANONICAL_TABLE, flags=re.M)
    assert [latin for latin, *_ in rows] == list(canonical)
    for latin, layers, inference, training, _ in rows:
        network = canonical[latin]
        assert int(layers) == len(network.layers)
        assert inference == f"{inference_macs(network) / 1e9:.4f}"
        assert training == f"{training_macs(network) / 1e9:.4f}"


def test_canonical_mac_counts_are_within_2_percent_of_the_published_ones():
    canonical = load_networks("canonical")
    for latin, *_, published in re.findall(CANONICAL_ROW, CANONICAL_TABLE, flags=re.M):
        ours, theirs = inference_macs(canonical[latin]), float(published) * 1e9
        if latin == "G":
            first_row = canonical["G"].layers[0].macs
            assert first_row == G_FIRST_ROW_SHAPE
            ours, theirs = ours - first_row, theirs - G_FIRST_ROW_PAPER
        assert abs(ours / theirs - 1) <= PUBLISHED_TOLERANCE, (latin, ours, theirs)


def test_options_page_has_every_option_with_its_help():
    page = (DOCS / "options.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(--gost-[\w-]+)(?:=([^`]+))?` \| (.*?) \|", page, flags=re.M)
    assert [(flag, metavar, text) for flag, metavar, text in rows] == [
        (option.flag, option.metavar, option.help) for option in OPTIONS
    ]


def test_the_docs_stay_a_reference_within_their_size():
    sizes = {page.name: len(page.read_bytes()) for page in DOCS.glob("*.md")}
    assert sum(sizes.values()) <= DOCS_LIMIT, sorted(sizes.items(), key=lambda kv: -kv[1])
    assert max(sizes.values()) <= PAGE_LIMIT, max(sizes.items(), key=lambda kv: kv[1])


def test_the_ci_recipes_of_the_paired_gate_give_pairs_enough_for_a_shared_runner():
    # The quick profile's 8 pairs a test leave every test "too noisy" (exit 7) on a shared
    # runner: a recipe that fails an unchanged change is no recipe.
    guide = (DOCS / "benchmarking.md").read_text(encoding="utf-8")
    job = guide.split("### A CI job\n", 1)[1].split("\n### ", 1)[0]
    recipes = re.findall(r"^```yaml\n(.*?)^```", job, flags=re.M | re.S)
    assert len(recipes) == 2
    for recipe in recipes:
        assert "--gost-versus=" in recipe and "--gost-images=200" in recipe, recipe


def test_the_api_pages_synopses_give_every_option_of_each_command():
    page = (DOCS / "api.md").read_text(encoding="utf-8")
    block = page.split("## Command line\n", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    (commands,) = [
        a.choices for a in _parser()._actions if isinstance(a, argparse._SubParsersAction)
    ]
    for line in block.splitlines():
        _, _, _, command, synopsis = line.split(maxsplit=4)  # python -m pytest_gostcnn ...
        # Each option by its longest flag: -o is --output.
        longest = {
            flag: max(action.option_strings, key=len)
            for action in commands[command]._actions
            for flag in action.option_strings
        }
        given = {longest.get(f, f) for f in re.findall(r"(?<![\w-])--?[a-z][\w-]*", synopsis)}
        assert given == set(longest.values()) - {"--help"}, (command, given)
