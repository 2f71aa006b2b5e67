"""The report's JSON schema (``report.schema.json``), and a validator for the keywords it uses.

The schema is JSON Schema 2020-12; the validator here knows the keywords the schema uses
(``KEYWORDS``) and refuses a schema with any other, so nothing in it is silently skipped.
``tests/test_report_check.py`` holds it against the jsonschema package on reports and on
broken ones. It saves ``check`` a dependency on a certifying body's machine.
"""

from __future__ import annotations

import json
import math
import re
from functools import cache
from importlib import resources
from typing import Any

KEYWORDS = frozenset(
    {
        "$schema", "$id", "$defs", "$ref", "title", "description",
        "type", "enum", "const", "pattern",
        "minimum", "maximum", "exclusiveMinimum",
        "properties", "required", "additionalProperties", "propertyNames",
        "items", "prefixItems", "minItems", "maxItems",
        "oneOf", "allOf",
    }
)  # fmt: skip
_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    # JSON has no NaN or infinity (the report is written with allow_nan=False); Python's
    # json module reads them all the same.
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v),
}


@cache
def report_schema() -> dict:
    text = (
        resources.files("pytest_gostcnn.reports")
        .joinpath("report.schema.json")
        .read_text(encoding="utf-8")
    )
    schema = json.loads(text)
    unknown = _unknown_keywords(schema)
    if unknown:  # a schema edit this validator would not honour
        raise RuntimeError(f"report.schema.json uses keywords the validator lacks: {unknown}")
    return schema


def _unknown_keywords(schema: Any) -> list[str]:
    found: set[str] = set()

    def walk(node: Any, under_names: bool = False) -> None:
        if isinstance(node, dict):
            if not under_names:
                found.update(set(node) - KEYWORDS)
            for key, value in node.items():
                if key in ("properties", "$defs"):
                    for sub in value.values():
                        walk(sub)
                elif key not in ("enum", "const", "required"):
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(schema)
    return sorted(found)


def validate(value: Any, schema: dict | None = None) -> list[str]:
    """Every place ``value`` breaks the schema, as "path: what is wrong" (empty: valid)."""
    root = schema if schema is not None else report_schema()
    errors: list[str] = []
    _check(value, root, root, "report", errors)
    return errors


def _check(value: Any, schema: dict, root: dict, path: str, errors: list[str]) -> None:
    if "$ref" in schema:
        _check(value, _resolve(root, schema["$ref"]), root, path, errors)
    for sub in schema.get("allOf", ()):
        _check(value, sub, root, path, errors)
    if "oneOf" in schema:
        matching = [sub for sub in schema["oneOf"] if not _errors(value, sub, root, path)]
        if len(matching) != 1:
            errors.append(f"{path}: matches {len(matching)} of the schema's alternatives, not 1")
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_TYPES[t](value) for t in types):
            errors.append(f"{path}: {_shown(value)} is not {' or '.join(types)}")
            return
    if "const" in schema and value != schema["const"]:
        errors.append(f"{path}: {_shown(value)} is not {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path}: {_shown(value)} is none of {', '.join(map(str, schema['enum']))}")
    if _TYPES["number"](value):
        _check_number(value, schema, path, errors)
    if isinstance(value, str) and "pattern" in schema and not re.search(schema["pattern"], value):
        errors.append(f"{path}: {_shown(value)} does not match {schema['pattern']}")
    if isinstance(value, dict):
        _check_object(value, schema, root, path, errors)
    if isinstance(value, list):
        _check_array(value, schema, root, path, errors)


def _check_number(value: float, schema: dict, path: str, errors: list[str]) -> None:
    if "minimum" in schema and value < schema["minimum"]:
        errors.append(f"{path}: {value} is below the minimum {schema['minimum']}")
    if "maximum" in schema and value > schema["maximum"]:
        errors.append(f"{path}: {value} is above the maximum {schema['maximum']}")
    if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
        errors.append(f"{path}: {value} is not above {schema['exclusiveMinimum']}")


def _check_object(value: dict, schema: dict, root: dict, path: str, errors: list[str]) -> None:
    properties = schema.get("properties", {})
    for name in schema.get("required", ()):
        if name not in value:
            errors.append(f"{path}: {name!r} is missing")
    for name, item in value.items():
        where = f"{path}.{name}"
        if "propertyNames" in schema:
            _check(name, schema["propertyNames"], root, f"{path} key {name!r}", errors)
        if name in properties:
            _check(item, properties[name], root, where, errors)
        elif schema.get("additionalProperties") is False:
            errors.append(f"{path}: {name!r} is not a field of the report")
        elif isinstance(schema.get("additionalProperties"), dict):
            _check(item, schema["additionalProperties"], root, where, errors)


def _check_array(value: list, schema: dict, root: dict, path: str, errors: list[str]) -> None:
    if "minItems" in schema and len(value) < schema["minItems"]:
        errors.append(f"{path}: {len(value)} items, fewer than {schema['minItems']}")
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        errors.append(f"{path}: {len(value)} items, more than {schema['maxItems']}")
    prefix = schema.get("prefixItems", [])
    for index, item in enumerate(value):
        sub = prefix[index] if index < len(prefix) else schema.get("items")
        if isinstance(sub, dict):
            _check(item, sub, root, f"{path}[{index}]", errors)


def _errors(value: Any, schema: dict, root: dict, path: str) -> list[str]:
    found: list[str] = []
    _check(value, schema, root, path, found)
    return found


def _resolve(root: dict, ref: str) -> dict:
    if not ref.startswith("#/"):
        raise RuntimeError(f"report.schema.json: only local references are read, not {ref}")
    node: Any = root
    for part in ref[2:].split("/"):
        node = node[part]
    return node


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:37] + "..."
