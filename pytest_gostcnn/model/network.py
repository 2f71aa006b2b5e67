"""Network tables (section 7, Appendix Б): the network a table describes, and the check of
what a table says.

A table mirrors the standard's: one row per layer with its number, type, inputs and
parameters, plus the network's letter, name, input map and provenance (docs/tables.md).
``parse_table`` checks one already read from YAML and infers every shape; finding and
reading the files is ``table_files``.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

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
TOP_KEYS = ("letter", "name", "provenance", "input", "layers")
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
