"""The package's import graph: no cycles (lazy imports inside functions count too), and the lower
layers (types, config, data, errors, algo/, verifiers/, tasks/) never import the stages above them."""

from __future__ import annotations

import ast
from pathlib import Path

import rlvr

ROOT = Path(rlvr.__file__).parent
LOWER = ("rlvr.types", "rlvr.config", "rlvr.data", "rlvr.errors", "rlvr.algo", "rlvr.verifiers",
         "rlvr.tasks")
UPPER = ("rlvr.training", "rlvr.cli", "rlvr.evaluation", "rlvr.monitor", "rlvr.report",
         "rlvr.sampling", "rlvr.rollout", "rlvr.train")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(name: str, modules: set[str]) -> str | None:
    """The longest prefix of a dotted import target that is one of rlvr's modules."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph() -> dict[str, set[str]]:
    files = {_module_name(p): p for p in ROOT.rglob("*.py")}
    modules = set(files)
    graph: dict[str, set[str]] = {}
    for mod, path in files.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                # `from pkg import sub` imports the submodule; `from mod import name` the module.
                names = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules
                         else node.module for a in node.names]
            else:
                continue
            for name in names:
                if name.startswith("rlvr"):
                    target = _resolve(name, modules)
                    if target and target != mod and target != "rlvr":
                        targets.add(target)
        graph[mod] = targets
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def _package_init(mod: str, graph: dict[str, set[str]]) -> bool:
    return any(m.startswith(mod + ".") for m in graph)


def test_no_import_cycles():
    graph = import_graph()
    # A package's __init__ re-exporting its own submodule is not a cycle between stages.
    graph = {m: {t for t in ts if not (_package_init(m, graph) and t.startswith(m + "."))}
             for m, ts in graph.items()}
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))


def test_lower_layers_import_no_stage_above_them():
    wrong = [(mod, t) for mod, targets in import_graph().items() if mod.startswith(LOWER)
             for t in targets if t.startswith(UPPER)]
    assert not wrong, wrong


def test_cycle_finder_finds_a_planted_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
