"""Where network tables are found and how they are read: the shipped table sets by name
(docs/tables.md), a directory of the user's, and YAML read strictly, so that a table says one
thing only; what a table says is checked by ``network.parse_table``.

A set is loaded by Latin id, in the standard's order М, Г, В, С, Р, Ш; one network by letter
or by the path of its file.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import yaml

from .network import CYRILLIC, LATIN, Network, TableError, network_key, parse_table

# The shipped table sets by name (docs/tables.md): the default reconstructions of the lost
# tables, and the widely used networks at full size, which are never compliant.
DEFAULT_TABLE_SET = "reconstructions"
CANONICAL_SET = "canonical"
TABLE_SETS = (DEFAULT_TABLE_SET, CANONICAL_SET)
USER_TABLES = "user"  # the set name of a directory of tables the user gives
TABLE_SUFFIXES = (".yaml", ".yml")  # in any case: Sh.YAML is a table too


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
