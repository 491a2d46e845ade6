"""The symbolic side of the math verifier: math-verify's parse + verify, run inside worker processes.

These functions may take unbounded time on hostile input (`9^{9^{9^{9}}}`); they are only called in
`workers.py` processes, which are killed when they overrun. math-verify's own signal timeouts are
switched off here because the kill is the timeout. Beyond math-verify, a numeric equation with no
variables (`3 = 4`) counts as a claim that is false, never as its right-hand side.
"""

from __future__ import annotations

import logging
import re
from functools import lru_cache

logging.getLogger("math_verify").setLevel(logging.CRITICAL)


def _wrap(answer: str) -> str:
    return answer if answer.lstrip().startswith("$") else f"${answer}$"


@lru_cache(maxsize=4096)
def _parse(answer: str) -> tuple:
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse

    configs = [LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()]
    return tuple(parse(_wrap(answer), extraction_config=configs, parsing_timeout=None))


def _false_numeric_claim(expr) -> bool:
    """`3 = 4`: an equation between two numbers that differ."""
    from sympy import Eq

    if not isinstance(expr, Eq) or expr.free_symbols:
        return False
    lhs, rhs = expr.args
    try:
        return bool(abs((lhs - rhs).evalf(30)) > 1e-9)
    except Exception:
        return True


def reference_ok(reference: str) -> bool:
    """Whether math-verify reads the reference as a mathematical object (not only a string)."""
    from sympy import Basic, MatrixBase

    return any(isinstance(x, (Basic, MatrixBase)) for x in _parse(reference))


def symbolic_equal(pred: str, reference: str) -> bool:
    """math-verify's verdict on pred against reference, with false numeric claims rejected."""
    from math_verify import verify

    gold, target = _parse(reference), _parse(pred)
    if not gold or not target:
        return False
    if any(_false_numeric_claim(t) for t in target):
        return False
    if verify(list(gold), list(target), allow_set_relation_comp=True, timeout_seconds=None):
        return True
    # Only where math-verify is known not to decide: trigonometry, or `i` in the reference.
    constant = not re.search(r"[A-Za-z]", re.sub(r"\\[A-Za-z]+", "", reference))
    if _TRIG.search(pred + reference) or _UNIT.search(reference) or (constant and _UNIT.search(pred)):
        return _identity(pred, reference)
    return False


_TRIG = re.compile(r"\\(?:sin|cos|tan|cot|sec|csc)(?![A-Za-z])")
_UNIT = re.compile(r"(?<![A-Za-z\\])i(?![A-Za-z])")
_DEGREE = re.compile(r"(\d+(?:\.\d+)?)\s*(?:\^\s*\{?\s*\\circ\s*\}?|°)")


def _radians(s: str) -> str:
    """`\\sin(90^\\circ - x)` → `\\sin(\\frac{90\\pi}{180} - x)`: degrees inside trigonometry."""
    return _DEGREE.sub(r"(\\frac{\1\\pi}{180})", s) if _TRIG.search(s) else s


def _identity(pred: str, reference: str) -> bool:
    """Equal as expressions where math-verify does not decide it: a trigonometric identity
    (`\\sin(90^\\circ - x)` vs `\\cos x`) or complex arithmetic (`i(2-i)` vs `1+2i`). Only single
    expressions (no equations, sets or relations), the answer's variables among the reference's,
    and sympy must prove the difference 0 (inside the worker's budget, like every check here)."""
    from sympy import Expr, I, simplify

    gold = [x for x in _parse(_radians(reference)) if isinstance(x, Expr)]
    target = [x for x in _parse(_radians(pred)) if isinstance(x, Expr)]
    if len(gold) != 1 or len(target) != 1:
        return False
    a, b = gold[0], target[0]
    units = {x for x in a.free_symbols | b.free_symbols if getattr(x, "name", "") == "i"}
    # `i` is the imaginary unit where the reference uses it, or where the reference is a constant
    # and `i` is the answer's only name (`e^{i\\pi}` vs `-1`): a variable could not equal a constant.
    if units and (units & a.free_symbols or (not a.free_symbols and b.free_symbols == units)):
        a, b = a.subs({u: I for u in units}), b.subs({u: I for u in units})
    if not b.free_symbols <= a.free_symbols or a.is_Relational or b.is_Relational:
        return False
    return bool(simplify(a - b) == 0)


def numeric_value(reference: str) -> tuple | None:
    """The reference as a number, when it is one: ("rational", p, q), ("real", 40 digits) or None.

    Lets the parent decide plain-number answers against a symbolic reference (`\\sqrt{2}`, `2\\pi`)
    without a worker round trip per answer.
    """
    from sympy import Basic, Expr

    parsed = [x for x in _parse(reference) if isinstance(x, Basic)]
    if len(parsed) != 1 or not isinstance(parsed[0], Expr) or parsed[0].free_symbols:
        return None
    expr = parsed[0].doit()
    if expr.is_Rational:
        return ("rational", int(expr.p), int(expr.q))
    if expr.is_real is not True or expr.is_finite is not True:
        return None
    value = expr.evalf(40)
    return ("real", str(value)) if value.is_Float else None
