"""The strict comparator: runs in the trusted process on values decoded from plain JSON.

Rules: bool is not int; NaN equals nothing; ints compare exactly (an int-valued float equals an
int, as in Python); a float compares with `math.isclose(rel_tol, abs_tol)`, tolerances stated by
the caller (default 1e-9 both); tuples and lists are interchangeable when `tuple_as_list` (JSON has
no tuples), otherwise the type must match; dicts need the same keys; sets the same members; any
other type (including the sandbox's `Bad` marker) equals nothing. Stdout matches when, after
removing trailing whitespace on each line and trailing blank lines, the line counts are equal and
every line is identical: no prefix matching, no `zip()` truncation.
"""

from __future__ import annotations

import math
from typing import Any

from rlvr.verifiers.sandbox.spec import Case

_SEQ = (list, tuple)


def values_equal(actual: Any, expected: Any, rel_tol: float = 1e-9, abs_tol: float = 1e-9,
                 tuple_as_list: bool = True) -> bool:
    ta, te = type(actual), type(expected)
    if te is bool or ta is bool:
        return ta is te and actual == expected
    if te in (int, float) and ta in (int, float):
        if te is int and ta is int:
            return actual == expected
        if not (math.isfinite(actual) and math.isfinite(expected)):
            return math.isinf(actual) and actual == expected
        return math.isclose(actual, expected, rel_tol=rel_tol, abs_tol=abs_tol)
    if te in _SEQ and ta in _SEQ:
        if ta is not te and not tuple_as_list:
            return False
        return len(actual) == len(expected) and all(
            values_equal(a, e, rel_tol, abs_tol, tuple_as_list) for a, e in zip(actual, expected))
    if te is dict and ta is dict:
        return actual.keys() == expected.keys() and all(
            values_equal(actual[k], expected[k], rel_tol, abs_tol, tuple_as_list) for k in expected)
    if te in (set, frozenset) and ta in (set, frozenset):
        return len(actual) == len(expected) and all(
            any(values_equal(a, e, rel_tol, abs_tol, tuple_as_list) for a in actual)
            for e in expected)
    if te in (str, bytes, type(None)):
        return ta is te and actual == expected
    return False


def _truthy(value: Any) -> bool | None:
    """Truthiness of a plain value; None for values that are not plain (they pass nothing)."""
    if value is None or type(value) in (bool, int, float, str, bytes, list, tuple, dict, set):
        return bool(value)
    return None


def case_passes(result: Any, case: Case, rel_tol: float = 1e-9, abs_tol: float = 1e-9) -> bool:
    """`result` is the decoded ["ok", value] or ["exc", name] the sandbox reported for `case`."""
    if not (isinstance(result, list) and len(result) == 2 and result[0] == "ok"):
        return False
    value = result[1]
    if case.kind == "eq":
        return values_equal(value, case.expected, rel_tol, abs_tol)
    if case.kind == "is":
        return type(value) is type(case.expected) and value == case.expected
    if case.kind == "close":
        return (type(value) in (int, float) and math.isfinite(value)
                and abs(value - case.expected) < case.tol)
    truth = _truthy(value)
    return truth is not None and truth == (case.kind == "truthy")


def _lines(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def stdout_matches(actual: str, expected: str) -> bool:
    a, e = _lines(actual), _lines(expected)
    return len(a) == len(e) and all(x == y for x, y in zip(a, e))
