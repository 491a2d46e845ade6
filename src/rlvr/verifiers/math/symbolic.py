"""The symbolic side of the math verifier: math-verify's parse + verify, run inside worker processes.

These functions may take unbounded time on hostile input (`9^{9^{9^{9}}}`); they are only called in
`workers.py` processes, which are killed when they overrun. math-verify's own signal timeouts are
switched off here because the kill is the timeout. Beyond math-verify, a numeric equation with no
variables (`3 = 4`) counts as a claim that is false, never as its right-hand side, and two forms
of one expression that math-verify does not meet are compared at random points (`_same_at_points`).
"""

from __future__ import annotations

import logging
import random
import re
import zlib
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
    return _same_at_points(pred, reference)


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


_POINTS = 6             # random points where both sides must be real and agree
_SIGNED_POINTS = 6      # points of either sign: where both sides are real there, they must agree
_TOLERANCE = 1e-12      # relative, on 30-digit evaluations of float points


def _same_at_points(pred: str, reference: str) -> bool:
    """Two forms of one closed expression that math-verify's simplification does not meet
    (`v_0 (r_0/(r+r_0))^{0.5}/(r+r_0)` vs `\\frac{v_0}{r_0}\\frac{1}{(1+r/r_0)^{3/2}}`): equal when
    both are real and agree to `_TOLERANCE` at `_POINTS` random points with positive variables (the
    domain a closed form of lengths, speeds and counts is written for), and disagree at no point
    of mixed signs where both are real (so `|x|` is not `x`, nor `\\sqrt{x^2}`). Single expressions
    with variables only, the answer's variables among the reference's; the points are seeded by
    the pair, so a verdict is reproducible."""
    from sympy import Expr

    gold = [x for x in _parse(reference) if isinstance(x, Expr)]
    target = [x for x in _parse(pred) if isinstance(x, Expr)]
    if len(gold) != 1 or len(target) != 1 or gold[0].is_Relational or target[0].is_Relational:
        return False
    a, b = gold[0], target[0]
    names = sorted(a.free_symbols, key=str)
    if not names or not b.free_symbols <= a.free_symbols:
        return False
    rng = random.Random(zlib.crc32(f"{pred}\x00{reference}".encode()))
    for k in range(_POINTS + _SIGNED_POINTS):
        sign = (lambda: 1) if k < _POINTS else (lambda: rng.choice((-1, 1)))
        point = {x: sign() * rng.uniform(0.3, 3.7) for x in names}
        agree = _agree(a, b, point)
        if agree is False or (agree is None and k < _POINTS):
            return False
    return True


def _agree(a, b, point: dict) -> bool | None:
    """Whether a and b agree at `point`; None when either is not a finite real number there."""
    try:
        va, vb = complex(a.evalf(30, subs=point)), complex(b.evalf(30, subs=point))
    except (TypeError, ValueError, ZeroDivisionError, OverflowError):
        return None
    scale = max(1.0, abs(va))
    if abs(va.imag) > _TOLERANCE * scale or abs(vb.imag) > _TOLERANCE * scale or va != va or vb != vb:
        return None
    if abs(va) == float("inf") or abs(vb) == float("inf"):
        return None
    return abs(va.real - vb.real) <= _TOLERANCE * scale
