"""Length gates ruff has no rule for: every function in src/rlvr is at most 60 lines and every file
at most 400. A function counts from its first decorator to its last line (docstring, comments and
blank lines included): what a reader has to hold at once. Nested functions count on their own and
inside their enclosing function."""

from __future__ import annotations

import ast
from pathlib import Path

import rlvr

ROOT = Path(rlvr.__file__).parent
MAX_FUNCTION_LINES = 60
MAX_FILE_LINES = 400


def _sources() -> list[Path]:
    return sorted(ROOT.rglob("*.py"))


def _name(path: Path) -> str:
    return path.relative_to(ROOT.parent).as_posix()


def function_lengths(path: Path) -> list[tuple[str, int]]:
    """(qualified name, lines) of every function and method defined in `path`."""
    out: list[tuple[str, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([child.lineno] + [d.lineno for d in child.decorator_list])
                out.append((f"{prefix}{child.name}", child.end_lineno - first + 1))
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(path.read_text(), filename=str(path)), "")
    return out


def test_the_gate_sees_the_package():
    assert len(_sources()) > 50
    assert any(name == "train" for name, _ in function_lengths(ROOT / "train.py"))


def test_functions_at_most_60_lines():
    long = [f"{_name(p)}::{name} ({n} lines)" for p in _sources()
            for name, n in function_lengths(p) if n > MAX_FUNCTION_LINES]
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: " + ", ".join(long)


def test_files_at_most_400_lines():
    long = [f"{_name(p)} ({n} lines)" for p in _sources()
            if (n := len(p.read_text().splitlines())) > MAX_FILE_LINES]
    assert not long, f"files over {MAX_FILE_LINES} lines: " + ", ".join(long)
