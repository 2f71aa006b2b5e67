"""The house: imports run down its floors, only the plugin imports pytest, no cycle, and
every layer type has each of its parts (docs/contributing.md, "Adding a layer type")."""

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from gost_helpers import REPOSITORY

from pytest_gostcnn.backends.common import has_kernel
from pytest_gostcnn.backends.cupy.xp_kernels import XpKernels
from pytest_gostcnn.backends.numpy import kernels as numpy_kernels
from pytest_gostcnn.conformance.error_kernels import ErrorModelKernels
from pytest_gostcnn.conformance.error_model import RULES, NoErrorRule, rule
from pytest_gostcnn.conformance.verification import layer_steps
from pytest_gostcnn.model.dtypes import PRECISIONS
from pytest_gostcnn.model.layers import LAYER_TYPES, make_layer
from pytest_gostcnn.reference import MODULES

# Where each importable part lives: the package, and the two folders that install inside it.
SOURCES = {
    "pytest_gostcnn": REPOSITORY / "pytest_gostcnn",
    "pytest_gostcnn.reference": REPOSITORY / "reference",
    "pytest_gostcnn.backends": REPOSITORY / "backends",
}
# Floors from the top: a module may import its own room and any room on a lower floor.
FLOORS = (
    {"__main__"},
    {"api"},  # pytest_gostcnn/__init__.py, the public names
    {"plugin"},
    {"run"},
    {"reports"},
    {"judgement"},  # needs both parts below: section 8's verdicts, section 9's timings
    {"performance"},  # the round loop judges its checks by section 8's rule
    {"conformance"},
    {"backends"},
    {"backend"},
    {"reference"},
    {"model", "networks"},
    {"machine"},
)


def _modules() -> dict[str, Path]:
    found = {}
    for package, folder in SOURCES.items():
        for path in folder.rglob("*.py"):
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            name = ".".join((package, *parts))
            if name.startswith("pytest_gostcnn.reference") and package == "pytest_gostcnn":
                continue  # an installed copy's reference/ lies inside; the checkout's does not
            found[name] = path
    return found


MODULES_BY_NAME = _modules()


def _room(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "api"
    return parts[1]


def _floor(room: str) -> int:
    return next(i for i, rooms in enumerate(FLOORS) if room in rooms)


def _imports(module: str, path: Path) -> set[str]:
    """The package's modules ``module`` imports (for type hints too: a dependency all the
    same)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base if is_package else base[:-1]
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            # ``from package import module`` needs the module; ``from module import name``
            # needs the module the name is in.
            submodules = {f"{target}.{alias.name}" for alias in node.names}
            found |= submodules & MODULES_BY_NAME.keys() or {target}
    return {name for name in found if name in MODULES_BY_NAME and name != module}


GRAPH = {module: _imports(module, path) for module, path in MODULES_BY_NAME.items()}


# Rooms the floors name ahead of their first module.
PLANNED = {"judgement"}


def test_the_house_has_its_rooms():
    rooms = {_room(module) for module in MODULES_BY_NAME}
    assert rooms == set().union(*FLOORS) - (PLANNED - rooms)


def test_imports_run_down_the_floors():
    upward = [
        f"{module} imports {target}"
        for module, targets in GRAPH.items()
        for target in targets
        if _room(target) != _room(module)
        and _floor(_room(target)) <= _floor(_room(module))
        and target != "pytest_gostcnn"  # every submodule's package: imported first, by Python
    ]
    assert upward == []


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every loop a depth-first walk of ``graph`` meets, as the modules along it."""
    found, state = [], {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = "open"
        for target in sorted(graph[module]):
            if state.get(target) == "open":
                found.append(path[path.index(target) :] + [target])
            elif target not in state:
                visit(target, [*path, target])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    return found


def test_no_import_cycle():
    assert cycles(GRAPH) == []


def test_the_cycle_check_finds_a_cycle():
    # The check above earns its keep only if it can fail.
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]


def test_only_the_plugin_imports_pytest():
    importers = []
    for module, path in MODULES_BY_NAME.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        if {"pytest", "_pytest"} & {name.split(".")[0] for name in names}:
            importers.append(module)
    assert importers and [m for m in importers if _room(m) != "plugin"] == []


# A room holds one thing: no module of the package or the backends is longer than this.
MODULE_LINES = 400


def test_no_module_is_over_the_size_of_one_room():
    long = {
        module: lines
        for module, path in MODULES_BY_NAME.items()
        if not module.startswith("pytest_gostcnn.reference")
        and (lines := len(path.read_text(encoding="utf-8").splitlines())) > MODULE_LINES
    }
    assert long == {}


def test_nothing_outside_the_judge_branches_on_a_reasons_words():
    # A reason's kind says which condition is missed; its words are for people.
    found = []
    for module, path in MODULES_BY_NAME.items():
        if _room(module) == "judgement":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                if any(isinstance(s, ast.Attribute) and s.attr == "short" for s in sides):
                    found.append(f"{module}:{node.lineno}")
    assert found == []


def _calls(name: str) -> list[tuple[str, ast.Call]]:
    """(module, call) of every call of a function or class called ``name`` in the package."""
    found = []
    for module, path in MODULES_BY_NAME.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and _called(node) == name:
                found.append((module, node))
    return found


def _called(call: ast.Call) -> str | None:
    func = call.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)


def test_the_judge_is_given_findings_built_in_one_place():
    # One road: report -> findings -> judge; Findings are built by judgement/from_report.py alone.
    builders = {module for module, _ in _calls("Findings")}
    assert builders == {"pytest_gostcnn.judgement.from_report"}
    judged = [(module, call) for module, call in _calls("judge")]
    assert judged and all(
        len(call.args) == 1
        and isinstance(call.args[0], ast.Call)
        and _called(call.args[0]) == "findings"
        for _, call in judged
    ), [module for module, _ in judged]


def rule_statements(tree: ast.AST) -> list[str]:
    """Comparisons that state a rule of compliance (docs/standard.md §7.7): an ОРП against
    100 %, an image count against section 9.3's 1,000,000."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        words = " ".join(ast.unparse(side) for side in sides).lower()
        constants = {side.value for side in sides if isinstance(side, ast.Constant)}
        if ("orp" in words and 100 in constants) or "full_profile_images" in words:
            found.append(ast.unparse(node))
    return found


def test_every_rule_of_compliance_is_stated_in_the_judgement():
    outside = [
        f"{module}: {statement}"
        for module, path in MODULES_BY_NAME.items()
        if _room(module) != "judgement"
        for statement in rule_statements(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert outside == []


def test_the_rule_check_finds_a_rule_stated_again():
    # The check above earns its keep only if it can fail.
    code = "above = [t for t in timings if t.orp is not None and t.orp > 100]\n"
    code += "full = images >= FULL_PROFILE_IMAGES\n"
    assert sorted(rule_statements(ast.parse(code))) == [
        "images >= FULL_PROFILE_IMAGES",
        "t.orp > 100",
    ]


def test_the_command_line_does_not_import_pytest():
    code = "import sys, pytest_gostcnn.__main__; print('pytest' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


# How a text would cite the notes kept beside the repository (spelt so as not to match here).
OUTSIDE = ("SPEC" + " §", "../" + "shared")


def test_no_text_cites_a_file_outside_the_repository():
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=REPOSITORY, capture_output=True, text=True, check=False
    ).stdout.split()
    if not tracked:
        pytest.skip("not a git checkout")
    citing = []
    for name in tracked:
        path = REPOSITORY / name
        if path.suffix not in {".py", ".md", ".yaml", ".sh", ".toml", ".cu"} or not path.is_file():
            continue
        text = path.read_text(encoding="utf-8")
        if any(citation in text for citation in OUTSIDE):
            citing.append(name)
    assert citing == []


@pytest.mark.parametrize("type_name", sorted(LAYER_TYPES))
def test_every_layer_type_has_its_reference_error_rule_and_kernels(type_name):
    module = MODULES[type_name]
    layer = next(layer for layer in _example_layers() if layer.type.name == type_name)
    for step in layer_steps(layer):
        if step != "update":  # one update for every type: reference/update.py
            assert callable(getattr(module, step)), f"reference/{type_name}.py has no {step}"
    assert rule(type_name) in {r for r in RULES.values()}
    if layer.has_weights:  # the benchmark's weight scale and the error model read these
        assert layer.fan_in > 0 and layer.fan_out > 0
    kernels = ErrorModelKernels(PRECISIONS["float32"])
    for step in ("forward", "backward"):
        assert callable(getattr(kernels, f"_{step}_{rule(type_name)}"))
    for kernel_set in (numpy_kernels, XpKernels):  # the CuPy backend's set is XpKernels
        for step in layer_steps(layer):
            if step != "update":
                assert has_kernel(kernel_set, type_name, step), (kernel_set, step)


def test_a_layer_type_without_an_error_rule_fails_loudly():
    with pytest.raises(NoErrorRule, match="no rule for layer type 'winograd'"):
        rule("winograd")


def _example_layers():
    window = {"Rx": 3, "Ry": 3, "S": 1, "Px": 1, "Py": 1}
    return [
        make_layer("conv", [(5, 5, 2)], F=3, **window),
        make_layer("depthwise", [(5, 5, 2)], **window),
        make_layer("maxpool", [(5, 5, 2)], **window),
        make_layer("avgpool", [(5, 5, 2)], **window),
        make_layer("relu", [(5, 5, 2)]),
        make_layer("concat", [(5, 5, 2), (5, 5, 3)]),
        make_layer("split", [(5, 5, 4)], L1=1),
        make_layer("eltwise", [(5, 5, 2), (5, 5, 2)]),
        make_layer("fc", [(2, 2, 3)], F=4),
        make_layer("shuffle", [(2, 2, 4)], G=2),
    ]


def test_every_package_is_listed_for_the_wheel():
    # pyproject.toml lists packages by name (reference/ and backends/ are mapped into the
    # package): one missing from the list is silently left out of a wheel.
    config = tomllib.loads((REPOSITORY / "pyproject.toml").read_text(encoding="utf-8"))
    listed = set(config["tool"]["setuptools"]["packages"])
    found = {name for name, path in MODULES_BY_NAME.items() if path.name == "__init__.py"}
    assert found - listed == set()
    assert listed - found == set()
