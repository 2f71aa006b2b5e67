"""Network tables (section 7, Appendix Б) as YAML data, and the loader that checks them.

A table mirrors the standard's: one row per layer with its number, type, inputs and
parameters, plus the network's letter, name, input map and provenance (docs/tables.md).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from .layers import (
    LAYER_TYPES,
    NETWORK_INPUT,
    Layer,
    LayerShapeError,
    MapRef,
    Shape,
    make_layer,
)

# The standard's six letters and the Latin ids used in options and test ids.
LATIN = {"М": "M", "Г": "G", "В": "V", "С": "S", "Р": "R", "Ш": "Sh"}
CYRILLIC = {latin: cyrillic for cyrillic, latin in LATIN.items()}
PROVENANCES = ("reconstruction", "official", "canonical")
# The shipped table sets by name (docs/tables.md): the default reconstructions of the lost
# tables, and the widely used networks at full size, which are never compliant.
DEFAULT_TABLE_SET = "reconstructions"
CANONICAL_SET = "canonical"
TABLE_SETS = (DEFAULT_TABLE_SET, CANONICAL_SET)
USER_TABLES = "user"  # the set name of a directory of tables the user gives
TOP_KEYS = ("letter", "name", "provenance", "input", "layers")
TABLE_SUFFIXES = (".yaml", ".yml")  # in any case: Sh.YAML is a table too
MAX_VALUES = 2**31  # in one image's map, or in one weight array (32-bit indices, memory)
ROW_KEYS = ("n", "type", "in1", "in2")
_MAP_REF = re.compile(r"^(\d+)(?:\.([12]))?$")


class TableError(ValueError):
    """A network table that does not describe a valid network."""


class UnknownNetworkError(TableError, KeyError):
    """A network key that is none of the standard's six letters.

    Also a ``KeyError``: the key is looked up among the networks.
    """

    # KeyError quotes its message (str(KeyError("x")) == "'x'"); print it as written.
    __str__ = TableError.__str__


@dataclass(frozen=True)
class Network:
    """One typical network: its table rows as layers with every shape inferred."""

    letter: str
    name: str
    provenance: str
    input_shape: Shape
    layers: tuple[Layer, ...]
    source: str

    @property
    def latin(self) -> str:
        """The ASCII id of the letter (M, G, V, S, R, Sh) for options and test ids."""
        return LATIN[self.letter]

    @property
    def output_shape(self) -> Shape:
        return self.layers[-1].out_shapes[0]

    @property
    def weight_layers(self) -> tuple[Layer, ...]:
        return tuple(layer for layer in self.layers if layer.has_weights)

    def consumers(self) -> dict[MapRef, list[Layer]]:
        """For every map, the layers that read it, in table order."""
        readers: dict[MapRef, list[Layer]] = {}
        for layer in self.layers:
            for ref in layer.inputs:
                readers.setdefault(ref, []).append(layer)
        return readers


def table_checksum(network: Network) -> str:
    """SHA-256 of what a table says (letter, name, provenance, input and every row's type,
    parameters and inputs), not of its file: comments and layout do not change it."""
    content = {
        "letter": network.letter,
        "name": network.name,
        "provenance": network.provenance,
        "input": list(network.input_shape),
        "layers": [
            [
                layer.number,
                layer.type.name,
                dict(layer.params),
                [[ref.layer, ref.output] for ref in layer.inputs],
            ]
            for layer in network.layers
        ],
    }
    text = json.dumps(content, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def default_tables_dir() -> Path:
    """The directory of the six reconstruction tables shipped with the package."""
    return Path(str(resources.files("pytest_gostcnn") / "networks"))


def table_set_dir(name: str) -> Path:
    """The directory of the shipped table set ``name`` (one of ``TABLE_SETS``)."""
    if name not in TABLE_SETS:
        known = ", ".join(TABLE_SETS)
        raise TableError(f"unknown table set {name!r}; the shipped sets are {known}")
    return default_tables_dir() if name == DEFAULT_TABLE_SET else default_tables_dir() / name


def table_set(tables: str | Path | None) -> str:
    """The set ``tables`` names: a shipped set's name, or "user" for a directory.

    A text equal to a shipped set's name is that set (None: the default); to load a
    directory of that name, give it as a path (``./canonical``) or a ``Path``.
    """
    if tables is None:
        return DEFAULT_TABLE_SET
    if isinstance(tables, str) and tables in TABLE_SETS:
        return tables
    return USER_TABLES


class _TableLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping (YAML would silently
    keep the last: a second ``letter:`` would turn one network into another) and aliases
    (``*name``: a table needs none, and nested ones multiply into billions of values)."""

    def compose_node(self, parent: yaml.Node | None, index: object) -> yaml.Node:
        if self.check_event(yaml.events.AliasEvent):
            raise yaml.composer.ComposerError(
                None,
                None,
                "aliases (*name) are not allowed in a table",
                self.peek_event().start_mark,
            )
        return super().compose_node(parent, index)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # <<: the base class merges it
                continue
            key = self.construct_object(key_node, deep=deep)
            try:
                twice = key in seen
            except TypeError:  # an unhashable key: the base class says so
                continue
            if twice:
                raise yaml.constructor.ConstructorError(
                    None, None, f"the key {key!r} is given twice", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


# The shipped sets go through libyaml's faster parser where PyYAML has it (docs/tables.md);
# they are the project's own, and tests/test_tables.py checks the strict loader reads them alike.
_SHIPPED_LOADER = getattr(yaml, "CSafeLoader", _TableLoader)


def load_table(path: str | Path, loader: type = _TableLoader) -> Network:
    """Load and check one table file; raise ``TableError`` naming the file and row."""
    try:
        path = Path(path).expanduser()
        special = path.exists() and not path.is_file()  # a FIFO would block the read forever
    except (OSError, RuntimeError) as exc:  # ~nouser, a name too long, a link loop
        raise TableError(f"{path}: {exc}") from None
    if special:
        raise TableError(f"{path}: not a regular file")
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=loader)
    except OSError as exc:
        raise TableError(f"{path}: cannot read the table: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise TableError(
            f"{path}: not UTF-8 text (byte {exc.start} is {exc.object[exc.start]:#04x}); "
            f"save the table as UTF-8"
        ) from exc
    except yaml.YAMLError as exc:
        raise TableError(f"{path}: not valid YAML: {exc}") from exc
    except RecursionError:
        raise TableError(f"{path}: nested too deeply to be a network table") from None
    return parse_table(data, str(path))


def load_networks(directory: str | Path | None = None) -> dict[str, Network]:
    """Every ``*.yaml``/``*.yml`` table in ``directory``, by Latin id: a shipped set by name
    (``"canonical"``; default the reconstructions) or a directory of tables.

    The order is the standard's: М, Г, В, С, Р, Ш.
    """
    if directory is not None and not str(directory).strip():
        raise TableError("an empty name; give a directory of network tables")
    named = table_set(directory)
    try:
        directory = table_set_dir(named) if named != USER_TABLES else Path(directory).expanduser()
        is_dir = directory.is_dir()
    except (OSError, RuntimeError) as exc:  # ~nouser, a name too long, a link loop
        raise TableError(f"{directory}: {exc}") from None
    if not is_dir:
        raise TableError(f"{directory}: not a directory of network tables")
    found: dict[str, Network] = {}
    paths = sorted(p for p in directory.iterdir() if p.suffix.lower() in TABLE_SUFFIXES)
    loader = _SHIPPED_LOADER if named != USER_TABLES else _TableLoader
    for path in paths:
        network = load_table(path, loader)
        if network.latin in found:
            earlier = found[network.latin].source
            raise TableError(f"{path}: network {network.letter} is already defined in {earlier}")
        found[network.latin] = network
    if not found:
        raise TableError(f"{directory}: no network tables (*.yaml, *.yml) found")
    return {latin: found[latin] for latin in LATIN.values() if latin in found}


def network_key(key: str) -> str:
    """The Latin id for a letter given in Latin (``R``, ``Sh``, any case) or Cyrillic (``Р``).

    Raises ``UnknownNetworkError`` (a ``TableError`` and a ``KeyError``) for any other key.
    """
    if key in LATIN:
        return LATIN[key]
    for latin in CYRILLIC:
        if key.lower() == latin.lower():
            return latin
    for cyrillic, latin in LATIN.items():
        if key.upper() == cyrillic:
            return latin
    known = ", ".join(f"{latin} ({cyrillic})" for latin, cyrillic in CYRILLIC.items())
    raise UnknownNetworkError(f"unknown network {key!r}; the networks are {known}")


def load_network(key: str | Path, directory: str | Path | None = None) -> Network:
    """One network by letter (``"R"``, ``"Р"``, ``"Sh"``) or by the path of a table file."""
    if isinstance(key, Path) or str(key).lower().endswith(TABLE_SUFFIXES):
        return load_table(key)
    networks = load_networks(directory)
    latin = network_key(str(key))
    if latin not in networks:
        where = directory or default_tables_dir()
        raise TableError(f"{where}: no table for network {latin} ({CYRILLIC[latin]})")
    return networks[latin]


def parse_table(data: Any, source: str) -> Network:
    """Check a table already read from YAML; ``source`` names it in error messages."""
    if not isinstance(data, Mapping):
        raise TableError(f"{source}: a table must be a mapping with keys {', '.join(TOP_KEYS)}")
    missing = [key for key in TOP_KEYS if key not in data]
    extra = [str(key) for key in data if key not in TOP_KEYS]
    if missing or extra:
        raise TableError(
            f"{source}: "
            + "; ".join(
                ([f"missing key(s) {', '.join(missing)}"] if missing else [])
                + ([f"unknown key(s) {', '.join(extra)}"] if extra else [])
            )
        )
    letter = data["letter"]
    # Checked as text first: a YAML list or mapping is not hashable, so `in LATIN` would fail.
    if not isinstance(letter, str) or letter not in LATIN:
        raise TableError(
            f"{source}: letter {letter!r} is not one of the standard's networks "
            f"{', '.join(LATIN)} (Cyrillic letters)"
        )
    if data["provenance"] not in PROVENANCES:
        raise TableError(
            f"{source}: provenance {data['provenance']!r} must be one of {', '.join(PROVENANCES)}"
        )
    if not isinstance(data["name"], str) or not data["name"].strip():
        raise TableError(f"{source}: name {data['name']!r} must be the network's name as text")
    input_shape = _input_shape(data["input"], source)
    rows = data["layers"]
    if not isinstance(rows, list) or not rows:
        raise TableError(f"{source}: layers must be a non-empty list of rows")
    layers = _layers(rows, input_shape, source)
    return Network(
        letter=letter,
        name=data["name"].strip(),
        provenance=data["provenance"],
        input_shape=input_shape,
        layers=layers,
        source=source,
    )


def _input_shape(value: Any, source: str) -> Shape:
    keys = ("X", "Y", "L")
    if not isinstance(value, Mapping) or set(value) != set(keys):
        raise TableError(f"{source}: input must be a mapping with keys X, Y, L, got {value!r}")
    for key in keys:
        if not _positive_int(value[key]):
            raise TableError(f"{source}: input {key}={value[key]!r} must be a positive integer")
    shape = (value["X"], value["Y"], value["L"])
    if math.prod(shape) > MAX_VALUES:
        raise TableError(f"{source}: input {_too_large(shape)}")
    return shape


def _too_large(shape: Iterable[int]) -> str:
    size = "x".join(map(str, shape))
    return f"{size} is more than 2**31 values, beyond what this suite supports"


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _layers(rows: list, input_shape: Shape, source: str) -> tuple[Layer, ...]:
    positions: dict[int, int] = {}
    for position, row in enumerate(rows, start=1):
        if not isinstance(row, Mapping):
            raise TableError(f"{source}: row #{position}: a row must be a mapping, got {row!r}")
        number = row.get("n")
        if not _positive_int(number):
            raise TableError(
                f"{source}: row #{position}: n={number!r} must be a positive integer row number"
            )
        if number in positions:
            raise TableError(
                f"{source}: row {number}: duplicate row number {number} "
                f"(list positions #{positions[number]} and #{position})"
            )
        positions[number] = position
    ordered = sorted(rows, key=lambda row: row["n"])
    layers: dict[int, Layer] = {}
    for index, row in enumerate(ordered):
        where = f"{source}: row {row['n']}"
        try:
            layer = _layer(row, index == 0, input_shape, layers)
        except (TableError, LayerShapeError) as exc:
            raise TableError(f"{where}: {exc}") from None
        for what, shape in [
            *((f"output {layer.output_name(i)}", out) for i, out in enumerate(layer.out_shapes)),
            *layer.weight_shapes.items(),
        ]:
            if math.prod(shape) > MAX_VALUES:
                raise TableError(f"{where}: {what} {_too_large(shape)}")
        layers[row["n"]] = layer
    network = tuple(layers.values())
    _check_every_output_used(network, source)
    return network


def _layer(row: Mapping, first: bool, input_shape: Shape, earlier: dict[int, Layer]) -> Layer:
    type_name = row.get("type")
    if not isinstance(type_name, str) or type_name not in LAYER_TYPES:
        raise TableError(
            f"unknown layer type {type_name!r}; the types are {', '.join(LAYER_TYPES)}"
        )
    layer_type = LAYER_TYPES[type_name]
    if first:
        # Before _map_ref: on the first row it would reject any name with a vaguer message.
        if any(row.get(column) not in (None, "-") for column in ("in1", "in2")):
            raise TableError("the first row reads the network input; its in1 and in2 must be '-'")
        refs = [NETWORK_INPUT]
    else:
        refs = [
            ref
            for ref in (
                _map_ref(row.get(column), column, earlier, row["n"]) for column in ("in1", "in2")
            )
            if ref is not None
        ]
        if row.get("in1") in (None, "-") and refs:
            raise TableError("in1 is empty but in2 is given; fill in1 first")
    if len(refs) != layer_type.n_inputs:
        raise TableError(
            f"a {type_name} layer takes {layer_type.n_inputs} input(s), the row gives {len(refs)}"
        )
    params = {key: value for key, value in row.items() if key not in ROW_KEYS}
    odd = [repr(key) for key in params if not isinstance(key, str)]
    if odd:
        raise TableError(f"parameter name(s) {', '.join(odd)} must be text such as F or Rx")
    in_shapes = [
        input_shape if ref == NETWORK_INPUT else earlier[ref.layer].out_shapes[ref.output]
        for ref in refs
    ]
    return make_layer(type_name, in_shapes, number=row["n"], inputs=tuple(refs), **params)


def _map_ref(value: Any, column: str, earlier: dict[int, Layer], number: int) -> MapRef | None:
    if value is None or value == "-":
        return None
    # YAML reads an unquoted 7.1 as a float; its text is still "7.1".
    text = str(value).strip()
    match = _MAP_REF.match(text)
    if isinstance(value, bool) or not match:
        raise TableError(f"{column}={value!r} must be a row number, n.1, n.2 or '-'")
    source_row, part = int(match.group(1)), match.group(2)
    if source_row >= number:
        raise TableError(f"{column}={text} names row {source_row}, which is not an earlier row")
    if source_row not in earlier:
        raise TableError(f"{column}={text} names row {source_row}, which is not in the table")
    producer = earlier[source_row]
    if producer.type.n_outputs == 2 and part is None:
        raise TableError(
            f"{column}={text} names split row {source_row}; write {source_row}.1 or {source_row}.2"
        )
    if producer.type.n_outputs == 1 and part is not None:
        raise TableError(
            f"{column}={text}: row {source_row} is a {producer.type.name} layer with one output; "
            f".1/.2 names the outputs of a split layer"
        )
    return MapRef(source_row, int(part) - 1 if part else 0)


def _check_every_output_used(layers: Iterable[Layer], source: str) -> None:
    layers = tuple(layers)
    last = layers[-1]
    if last.type.n_outputs != 1:
        raise TableError(f"{source}: row {last.number}: the last row must have one output")
    used = {ref for layer in layers for ref in layer.inputs}
    for layer in layers[:-1]:
        for index, ref in enumerate(layer.outputs):
            if ref not in used:
                raise TableError(
                    f"{source}: row {layer.number}: output {layer.output_name(index)} "
                    f"is not read by any later row "
                    f"(only the last row's output is the network output)"
                )
