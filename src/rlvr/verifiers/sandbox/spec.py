"""Test specs (trusted side): validate the three shapes and turn assert suites into cases.

Shapes: `{"entry_point": NAME, "cases": [{"args": [...], "expected": ...}]}` (call-based),
`{"stdio": [{"input": ..., "output": ...}]}`, and `{"entry_point": NAME, "check": SOURCE}` where
SOURCE defines `check(candidate)` made of asserts. An assert suite whose every statement has the
shape `assert candidate(<literals>) == <literal>` (or `is`, `not`, bare truthiness, or
`abs(candidate(...) - <literal>) < <literal>`) becomes call cases, with every literal evaluated here
by `ast.literal_eval`; anything else stays a `check` run through the proxy in a second process.
Not guaranteed: that a converted suite is exactly as lenient as Python's `==` (see compare.py).
"""

from __future__ import annotations

import ast
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from rlvr.verifiers.sandbox import codec


@dataclass(frozen=True)
class Case:
    args: tuple
    expected: Any = None
    kind: str = "eq"          # eq | close | is | truthy | falsy
    tol: float = 0.0


@dataclass(frozen=True)
class TestSpec:
    kind: str                               # call | stdio | check
    key: str                                # content hash: the test-set id for caching
    entry: str | None = None
    cases: tuple[Case, ...] = ()
    stdio: tuple[tuple[str, str], ...] = ()
    check: str | None = None

    def payload(self, code: str, stop_on_exc: bool = True) -> dict:
        """The job payload: code and inputs only, never expected values (a `check` suite, which
        holds them, is passed separately as the job's blob: see `SandboxPool.run`)."""
        if self.kind == "call":
            return {"code": code, "entry": self.entry, "stop_on_exc": stop_on_exc,
                    "args": [codec.encode(c.args) for c in self.cases]}
        if self.kind == "stdio":
            return {"code": code, "inputs": [i for i, _ in self.stdio]}
        return {"code": code, "entry": self.entry}  # the check source goes as a blob


def parse_tests(tests: Any) -> TestSpec:
    """Validate a spec; raises ValueError saying what is wrong."""
    if not isinstance(tests, dict):
        raise ValueError("tests must be an object with 'cases', 'stdio' or 'check'")
    key = hashlib.sha256(json.dumps(tests, sort_keys=True, default=repr).encode()).hexdigest()
    if "stdio" in tests:
        return TestSpec("stdio", key, stdio=_stdio_cases(tests["stdio"]))
    entry = tests.get("entry_point")
    if not isinstance(entry, str) or not entry.isidentifier():
        raise ValueError("'entry_point' must be a function name")
    if "cases" in tests:
        return TestSpec("call", key, entry, cases=_call_cases(tests["cases"]))
    if isinstance(tests.get("check"), str):
        source = tests["check"]
        try:
            tree = ast.parse(source)
        except SyntaxError as exc:
            raise ValueError(f"'check' does not parse: {exc.msg} (line {exc.lineno})") from None
        cases = convert_check(tree)
        if cases:
            return TestSpec("call", key, entry, cases=tuple(cases))
        return TestSpec("check", key, entry, check=source)
    raise ValueError("tests need 'cases', 'stdio' or 'check'")


def _stdio_cases(rows: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(rows, list) or not rows:
        raise ValueError("'stdio' must be a non-empty list")
    out = []
    for i, row in enumerate(rows):
        if not (isinstance(row, dict) and isinstance(row.get("input"), str)
                and isinstance(row.get("output"), str)):
            raise ValueError(f"stdio[{i}] needs string 'input' and 'output'")
        out.append((row["input"], row["output"]))
    return tuple(out)


def _call_cases(rows: Any) -> tuple[Case, ...]:
    if not isinstance(rows, list) or not rows:
        raise ValueError("'cases' must be a non-empty list")
    out = []
    for i, row in enumerate(rows):
        if not (isinstance(row, dict) and isinstance(row.get("args"), list) and "expected" in row):
            raise ValueError(f"cases[{i}] needs a list 'args' and an 'expected'")
        out.append(Case(tuple(row["args"]), row["expected"]))
    return tuple(out)


def convert_check(tree: ast.Module) -> list[Case] | None:
    """Cases equivalent to `def check(candidate)`'s asserts, or None when any is not convertible."""
    checks = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check"]
    if len(checks) != 1 or len(checks[0].args.args) != 1:
        return None
    param, cases = checks[0].args.args[0].arg, []
    for stmt in checks[0].body:
        if isinstance(stmt, (ast.Pass, ast.Import, ast.ImportFrom)) or _is_docstring(stmt):
            continue
        if isinstance(stmt, ast.Assert) and _is_true(stmt.test):
            continue
        case = _assert_case(stmt.test, param) if isinstance(stmt, ast.Assert) else None
        if case is None:
            return None
        cases.append(case)
    return cases or None


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)


def _is_true(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


class _NotLiteral(Exception):
    pass


def _literal(node: ast.expr) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise _NotLiteral from None


def _call_args(node: ast.expr, param: str) -> tuple | None:
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == param
            and not node.keywords and not any(isinstance(a, ast.Starred) for a in node.args)):
        return tuple(_literal(a) for a in node.args)
    return None


def _assert_case(test: ast.expr, param: str) -> Case | None:
    try:
        return _assert_case_or_raise(test, param)
    except _NotLiteral:
        return None


def _assert_case_or_raise(test: ast.expr, param: str) -> Case | None:
    args = _call_args(test, param)
    if args is not None:
        return Case(args, kind="truthy")
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        args = _call_args(test.operand, param)
        return Case(args, kind="falsy") if args is not None else None
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return None
    left, op, right = test.left, test.ops[0], test.comparators[0]
    if isinstance(op, ast.Eq):
        for call, other in ((left, right), (right, left)):
            args = _call_args(call, param)
            if args is not None:
                return Case(args, _literal(other), "eq")
        return None
    if isinstance(op, ast.Is) and isinstance(right, ast.Constant):
        args = _call_args(left, param)
        return Case(args, right.value, "is") if args is not None else None
    if isinstance(op, (ast.Lt, ast.LtE)):
        return _close_case(left, _literal(right), param)
    return None


def _close_case(node: ast.expr, tol: Any, param: str) -> Case | None:
    """`abs(candidate(...) - x) < tol` (abs or math.fabs, either operand order)."""
    if not isinstance(node, ast.Call) or len(node.args) != 1 or not (
            (isinstance(node.func, ast.Name) and node.func.id == "abs")
            or (isinstance(node.func, ast.Attribute) and node.func.attr == "fabs")):
        return None
    diff = node.args[0]
    if not isinstance(diff, ast.BinOp) or not isinstance(diff.op, ast.Sub) or type(tol) not in (int, float):
        return None
    for call, other in ((diff.left, diff.right), (diff.right, diff.left)):
        args = _call_args(call, param)
        if args is not None:
            return Case(args, _literal(other), "close", float(tol))
    return None
