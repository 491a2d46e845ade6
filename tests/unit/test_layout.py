"""rlvr's layers, lowest first, checked on the package graph.

A package may import packages of lower layers; packages of one layer may import each other but may
not form a cycle. Every import counts: module level, inside functions, under `if TYPE_CHECKING`,
relative (`from .. import x`) and `importlib.import_module("rlvr....")` with a literal name. The
CLI's lazy imports are no exception to the rule, they just cannot break it (the CLI is the top
layer). "Package" means the first name under `rlvr`: `rlvr.training.update` belongs to `training`,
`rlvr/train.py` to `train`, and `rlvr/__init__.py` (the public surface, which re-exports from
every layer) to `rlvr`, the top layer, so nothing inside the library may import it.

Not checked: dotted strings a registry resolves later (`"rlvr.tasks.arithmetic:ArithmeticVerifier"`
in the verifier registry), and imports of rlvr from outside `src/rlvr` (tests, bench, experiments).
Every failure lists all violations at once, each with the file and line that makes it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import rlvr

ROOT = Path(rlvr.__file__).parent

LAYERS: list[set[str]] = [
    {"types", "errors"},
    {"config"},
    {"algo", "verifiers", "tasks", "data"},
    {"models"},
    {"rollout"},
    {"sampling", "evaluation", "monitor"},
    {"training", "train"},
    {"agents"},
    {"report", "cli", "__main__", "testing", "rlvr"},
]

Edges = dict[tuple[str, str], list[str]]


def _module_name(path: Path, root: Path) -> tuple[str, bool]:
    parts = path.relative_to(root.parent).with_suffix("").parts
    is_init = parts[-1] == "__init__"
    return ".".join(parts[:-1] if is_init else parts), is_init


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _targets(node: ast.AST, module: str, is_init: bool) -> list[str]:
    """The absolute dotted names `node` imports (empty when it is no import)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom):
        if node.level:
            base = module.split(".")[: len(module.split(".")) + is_init - node.level]
            head = ".".join(base + ([node.module] if node.module else []))
        else:
            head = node.module or ""
        # `from a import b` imports submodule a.b if there is one, else module a: callers resolve
        # each name to its longest prefix that is a module.
        return [f"{head}.{a.name}" for a in node.names]
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module" and node.args
            and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
        return [node.args[0].value]
    return []


def _imports(root: Path) -> list[tuple[str, bool, str, str]]:
    """(importer module, whether it is a package's __init__, imported name, "path:line") for every
    import of a module of `root` in a module of `root`."""
    top = root.name
    out = []
    for path in sorted(root.rglob("*.py")):
        module, is_init = _module_name(path, root)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            for target in _targets(node, module, is_init):
                if target == top or target.startswith(top + "."):
                    out.append((module, is_init, target, f"{path.relative_to(root.parent)}:{node.lineno}"))
    return out


def package_edges(root: Path) -> Edges:
    """(importer package, imported package) -> ["path:line", ...] for every import across packages."""
    top = root.name
    packages = {p.stem if p.suffix else p.name for p in root.iterdir()
                if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()}
    edges: Edges = {}
    for module, _, target, site in _imports(root):
        name = _package(target)
        src, dst = _package(module), (name if name in packages else top)
        if src != dst:
            edges.setdefault((src, dst), []).append(site)
    return edges


def module_edges(root: Path) -> Edges:
    """The same between modules. The imported module is the longest prefix of the imported name
    that is a module; a package's __init__ re-exporting its own submodules is left out."""
    modules = {_module_name(p, root)[0] for p in root.rglob("*.py")}
    edges: Edges = {}
    for module, is_init, target, site in _imports(root):
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if target and target != module and not (is_init and target.startswith(module + ".")):
            edges.setdefault((module, target), []).append(site)
    return edges


def layer_violations(edges: Edges, layers: list[set[str]]) -> list[str]:
    """Imports of a package from a higher layer, and packages no layer lists."""
    rank = {name: i for i, layer in enumerate(layers) for name in layer}
    out = [f"{name}: in no layer of LAYERS" for name in sorted({n for e in edges for n in e} - set(rank))]
    for (src, dst), sites in sorted(edges.items()):
        if src in rank and dst in rank and rank[dst] > rank[src]:
            out.append(f"{src} (layer {rank[src]}) imports {dst} (layer {rank[dst]}): {', '.join(sites)}")
    return out


def cycles(edges: Edges) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    graph: dict[str, set[str]] = {}
    for src, dst in edges:
        graph.setdefault(src, set()).add(dst)
        graph.setdefault(dst, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while (member := stack.pop()) != node:
                component.append(member)
            if component:
                found.append(sorted(component + [node]))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def cycle_report(edges: Edges, layers: list[set[str]]) -> list[str]:
    """Each cycle with the edges that close it: those inside it that do not point to a lower layer."""
    rank = {name: i for i, layer in enumerate(layers) for name in layer}
    out = []
    for component in cycles(edges):
        closing = [f"{s} -> {d}: {', '.join(sites)}" for (s, d), sites in sorted(edges.items())
                   if s in component and d in component and rank.get(d, -1) >= rank.get(s, -1)]
        out.append(f"cycle among {', '.join(component)}, closed by " + "; ".join(closing))
    return out


def test_every_package_imports_only_lower_layers():
    wrong = layer_violations(package_edges(ROOT), LAYERS)
    assert not wrong, "\n".join(["imports against the layer order:"] + wrong)


def test_no_package_cycle():
    found = cycle_report(package_edges(ROOT), LAYERS)
    assert not found, "\n".join(["package cycles:"] + found)


def test_no_module_cycle():
    found = cycles(module_edges(ROOT))
    assert not found, "\n".join(["module cycles:"] + [" -> ".join(c) for c in found])


def test_layers_name_each_package_once():
    names = [n for layer in LAYERS for n in layer]
    assert len(names) == len(set(names))


def _plant(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / "pkg" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "pkg"


def test_a_planted_lower_to_higher_import_fails(tmp_path):
    """A low package importing a high one inside a function, relatively, is reported with its line;
    so is every other violation in the same tree, not only the first."""
    pkg = _plant(tmp_path, {
        "__init__.py": "",
        "low/__init__.py": "",
        "low/a.py": "def f():\n    from ..high import b\n",
        "low/c.py": "import importlib\nimportlib.import_module('pkg.high.b')\n",
        "mid.py": "from pkg.low import a\n",
        "high/__init__.py": "",
        "high/b.py": "from pkg import mid\n",
    })
    edges = package_edges(pkg)
    assert edges == {("low", "high"): ["pkg/low/a.py:2", "pkg/low/c.py:2"], ("mid", "low"): ["pkg/mid.py:1"],
                     ("high", "mid"): ["pkg/high/b.py:1"]}
    wrong = layer_violations(edges, [{"low"}, {"mid"}, {"high"}])
    assert wrong == ["low (layer 0) imports high (layer 2): pkg/low/a.py:2, pkg/low/c.py:2"]
    assert cycles(edges) == [["high", "low", "mid"]]
    assert cycles(module_edges(pkg)) == [["pkg.high.b", "pkg.low.a", "pkg.mid"]]
    assert layer_violations(edges, [{"low"}, {"high"}]) == [
        "mid: in no layer of LAYERS", "low (layer 0) imports high (layer 1): pkg/low/a.py:2, pkg/low/c.py:2"]


def test_a_planted_same_layer_cycle_is_found_and_the_root_counts_as_a_package(tmp_path):
    pkg = _plant(tmp_path, {
        "__init__.py": "def __getattr__(name):\n    from pkg.a import x\n",
        "a.py": "from . import b\n",
        "b.py": "import pkg.a\nfrom pkg import __version__\n",
    })
    edges = package_edges(pkg)
    assert set(edges) == {("pkg", "a"), ("a", "b"), ("b", "a"), ("b", "pkg")}
    assert cycles(edges) == [["a", "b", "pkg"]]
    assert cycle_report(edges, [{"a", "b"}, {"pkg"}]) == [
        "cycle among a, b, pkg, closed by a -> b: pkg/a.py:1; b -> a: pkg/b.py:1; b -> pkg: pkg/b.py:2"]
    assert layer_violations(edges, [{"a", "b"}, {"pkg"}]) == ["b (layer 0) imports pkg (layer 1): pkg/b.py:2"]
