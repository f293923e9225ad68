"""No import cycles between the project's modules, and imports only go down the floors.

A cycle makes the import order decide what works (a name imported before the module that
defines it has finished), and ties modules that should change apart. Every ``import`` counts,
at module level or inside a function (a deferred import only hides the cycle from the start-up
path), and so do imports under ``if TYPE_CHECKING:``: they never run, but two modules that
name each other's types are still one piece of code in two files.

The floors (``docs/architecture.md``, "Floors"): a package may import its own modules, the
floors below its own, and nothing beside it: no exception.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.project import PACKAGES, module_files


def _type_checking_only(tree: ast.Module) -> set[int]:
    """Line numbers of imports that run only for a type checker."""
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for inner in node.body:
                for sub in ast.walk(inner):
                    if isinstance(sub, ast.Import | ast.ImportFrom):
                        lines.add(sub.lineno)
    return lines


def imports_of(name: str, path: Path, modules: set[str], type_only: bool = True) -> set[str]:
    """The project's modules that ``name`` imports (with ``type_only``: also those it imports
    for a type checker alone)."""
    tree = ast.parse(path.read_text(), str(path))
    skipped = set() if type_only else _type_checking_only(tree)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom) and node.lineno in skipped:
            continue
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name in modules}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                target = f"{base}.{alias.name}"
                if target in modules:
                    out.add(target)
                elif base in modules:
                    out.add(base)
    out.discard(name)
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted.

    >>> cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}})
    [['a', 'b', 'c']]
    >>> cycles({"a": {"b"}, "b": set()})
    []
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_the_import_graph_is_read_from_every_package() -> None:
    modules = module_files()
    assert {m.split(".")[0] for m in modules} == set(PACKAGES)
    graph = {name: imports_of(name, path, set(modules)) for name, path in modules.items()}
    assert "streams.join" in graph["streams.app"]  # a module-level import
    assert "streams.app" in graph["streams.worker"]  # one inside a function counts too


def test_no_module_imports_itself_through_others() -> None:
    modules = module_files()
    graph = {name: imports_of(name, path, set(modules)) for name, path in modules.items()}
    assert cycles(graph) == []


# The floor of each package (``ingest`` split: its contract is the ground, the rest a stage).
FLOORS = {
    "infra": 0,
    "ingest.contract": 0,
    "rewards": 1,
    "models": 1,
    "agent": 1,
    "stats": 0,
    "checkpoints": 2,
    "llamacpp": 3,
    "ingest": 4,
    "streams": 4,
    "warehouse": 4,
    "serving": 4,
    "otel": 4,
    "release": 5,
    "trainer": 6,
    "console": 6,
    "rtrl": 7,
}


def unit_of(module: str) -> str:
    """The package a module's floor is read from.

    >>> unit_of("ingest.contract.events"), unit_of("ingest.collector.app"), unit_of("serving")
    ('ingest.contract', 'ingest', 'serving')
    """
    parts = module.split(".")
    if parts[0] == "ingest" and len(parts) > 1 and parts[1] == "contract":
        return "ingest.contract"
    return parts[0]


def upward(graph: dict[str, set[str]]) -> list[str]:
    """Every import that does not go down a floor.

    >>> upward({"models.policy": {"infra.settings"}, "agent.harness": {"models.policy"}})
    ['agent.harness -> models.policy (floor 1 -> 1)']
    >>> upward({"serving.api": {"infra.api_keys"}, "trainer.x": {"trainer.y"}})
    []
    """
    found = []
    for name, targets in sorted(graph.items()):
        here = unit_of(name)
        for target in sorted(targets):
            there = unit_of(target)
            if here == there:
                continue
            if FLOORS[there] >= FLOORS[here]:
                found.append(f"{name} -> {target} (floor {FLOORS[here]} -> {FLOORS[there]})")
    return found


def test_every_package_has_a_floor() -> None:
    assert {unit_of(m) for m in module_files()} == set(FLOORS)


def test_type_only_imports_count() -> None:
    modules = module_files()
    name = "rtrl.worlds.token_reader"  # names models.policy's Completion for the type checker only
    path = modules[name]
    assert "models.policy" in imports_of(name, path, set(modules))
    assert "models.policy" not in imports_of(name, path, set(modules), type_only=False)


def test_imports_only_go_down_the_floors() -> None:
    modules = module_files()
    graph = {name: imports_of(name, path, set(modules)) for name, path in modules.items()}
    assert upward(graph) == []


def test_the_trainer_and_the_roof_run_llama_cpp_without_the_gateway() -> None:
    """The llama.cpp runtime is a floor of its own (``llamacpp/``): the trainer's evals and the
    loop use it without importing the gateway that serves with it."""
    modules = module_files()
    graph = {name: imports_of(name, path, set(modules)) for name, path in modules.items()}
    reaching = sorted(
        f"{name} -> {target}"
        for name, targets in graph.items()
        if unit_of(name) in {"trainer", "rtrl"}
        for target in targets
        if unit_of(target) == "serving"
    )
    assert reaching == []
