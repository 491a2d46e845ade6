"""Composition, no implementation inheritance: no class in rlvr subclasses another class of rlvr's.

The one exception is the error hierarchy (`errors.UserError` and its kinds), where subclassing is
how callers catch a family of errors; it carries no behaviour. Protocols are not base classes here:
implementations never name them as bases."""

from __future__ import annotations

import ast
from pathlib import Path

import rlvr

ROOT = Path(rlvr.__file__).parent
EXCEPTIONS = {"UserError"}   # bases allowed: exception families


def subclassing(root: Path) -> list[str]:
    trees = {p: ast.parse(p.read_text()) for p in root.rglob("*.py")}
    ours = {n.name for t in trees.values() for n in ast.walk(t) if isinstance(n, ast.ClassDef)}
    found = []
    for path, tree in sorted(trees.items()):
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef):
                continue
            for base in node.bases:
                name = ast.unparse(base).split(".")[-1]
                if name in ours and name not in EXCEPTIONS:
                    found.append(f"{path.relative_to(root.parent)}:{node.lineno} {node.name}({name})")
    return found


def test_no_rlvr_class_subclasses_another():
    found = subclassing(ROOT)
    assert not found, "implementation inheritance: " + ", ".join(found)


def test_a_planted_subclass_is_found(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "a.py").write_text("class Base:\n    pass\n")
    (pkg / "b.py").write_text("from pkg import a\n\nclass Child(a.Base):\n    pass\n\n"
                              "class Error(Exception):\n    pass\n")
    assert subclassing(pkg) == ["pkg/b.py:3 Child(Base)"]
