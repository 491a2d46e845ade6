"""The in-process fast path of the math verifier: plain numbers compared exactly, no sympy.

`normalize` turns an answer string into a canonical text (spacing, `\\left`/`\\right`, `\\dfrac`,
currency signs, trailing units, thousands separators). `to_number` reads plain integers, decimals,
`a/b`, `\\frac{a}{b}`, percentages, scientific notation and simple LaTeX numbers as an exact
`Fraction`, and `to_structure` reads sets, intervals, tuples and bare lists of such numbers.
`fast_equal` decides equality when both sides are plain numbers and returns None
otherwise, so that only genuinely symbolic answers go to the worker processes.

Equality follows math-verify's numeric rules: exact for two terminating decimals (3 ≠ 3.0000001);
rounded to 6 places when one side is a decimal and the other a non-terminating fraction
(1/3 = 0.333333 but 1/3 ≠ 0.333); a percentage equals its number or its hundredth (50% = 50 = 0.5).
Numbers longer than `MAX_DIGITS` are not read here (they go to the bounded symbolic check).
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import NamedTuple

MAX_DIGITS = 200
ROUND_PLACES = 6

_UNITS = (
    "cm|mm|km|m|kg|g|mg|lb|lbs|pounds?|ounces?|oz|s|sec|seconds?|minutes?|mins?|hours?|hrs?|h|days?|"
    "weeks?|months?|years?|dollars?|cents?|euros?|degrees?|inch(?:es)?|in|feet|foot|ft|yards?|yd|"
    "miles?|mi|mph|km/h|m/s|liters?|litres?|l|ml|units?|square\\s+\\w+|sq\\s*\\w+|cubic\\s+\\w+|"
    "meters?|metres?|centimeters?|kilometers?|grams?|kilograms?|people|students?|points?|ways?|"
    "times|apples|marbles|books|cookies"
)
# A unit may carry a power (`10 cm^2`, `3 m³`); "percent" is not a unit but a scale (see to_number).
_TRAILING_UNIT = re.compile(rf"(?<=[\d}}.])\s*(?:\\,|\\ |~)?\s*(?:{_UNITS})(?:\^\{{?[23]\}}?|²|³)?\.?$",
                            re.IGNORECASE)
# Percent written as a word or in text (`33.5 percent`, `33.5 pct`, `\frac12\text{ percent}`) is `%`.
_PERCENT_WORD = re.compile(r"\s*(?:\\(?:text|mbox|mathrm)\s*\{\s*(?:percent|pct|\\?%)\s*\}|(?<![A-Za-z])"
                           r"(?:percent|per\s*cent|pct)\.?)\s*$", re.IGNORECASE)
_TEXT_WRAP = re.compile(r"\\(?:text|textbf|mathrm|mathbf|mbox|textnormal|operatorname)\s*\{([^{}]*)\}")
_TRAILING_TEXT = re.compile(r"(?<=[\d}.])\s*\\(?:text|mbox|mathrm)\s*\{\s*[A-Za-z][A-Za-z .²³/^-]*\}$")
_TRAILING_WORDS = re.compile(r"(?<=[\d.])\s+[A-Za-z]{3,}(?:\s+[A-Za-z]{3,}){0,2}\.?$")  # "18 stickers"
_CURRENCY = re.compile(r"^(?:\\\$|\$|€|£|¥|\\euro|USD|US\$|EUR|GBP|Rs\.?)\s*")
_DEGREES = re.compile(r"\^\s*\{?\\circ\}?|°|\\degree")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)")
_FRAC = re.compile(r"([+-]?)\\[dt]?frac"
                   r"\s*(?:\{\s*([+-]?\d+)\s*\}|(\d))\s*(?:\{\s*([+-]?\d+)\s*\}|(\d))")
_SLASH = re.compile(r"([+-]?\d+)\s*/\s*([+-]?\d+)")
_SCI = re.compile(r"([+-]?(?:\d+(?:\.\d*)?|\.\d+))\s*(?:\\times|\\cdot|\*|x)"
                  r"\s*10\s*\^\s*\{?\s*([+-]?\d{1,3})\s*\}?")
_E_NOTATION = re.compile(r"([+-]?(?:\d+(?:\.\d*)?|\.\d+))[eE]([+-]?\d{1,3})")
_REPEATING = re.compile(r"([+-]?)(\d*)\.(\d*)\\overline\s*\{?(\d{1,20})\}?")


def _text_key(answer: str) -> str | None:
    from rlvr.verifiers.math.forms import text_key  # forms imports extract only
    return text_key(answer)


class Number(NamedTuple):
    value: Fraction
    percent: bool      # written with %, so its hundredth is also accepted
    decimal: bool      # written with a decimal point (or as a percentage of one)
    places: int = 0    # digits after the decimal point as written


def normalize(answer: str) -> str:
    """Canonical text of an answer: what two spellings of the same answer have in common."""
    s = answer.strip()
    for old, new in (("\\left", ""), ("\\right", ""), ("\\!", ""), ("\\,", ""), ("\\;", ""), ("{,}", ""),
                     ("\\dfrac", "\\frac"), ("\\tfrac", "\\frac"), ("\\displaystyle", ""),
                     ("\\varnothing", "\\emptyset"), ("−", "-"), ("\\%", "%"), ("\\$", "$")):
        s = s.replace(old, new)
    s = re.sub(r"(?<!\\)\\ ", "", s)  # a LaTeX space, not a matrix row break
    s = _PERCENT_WORD.sub("%", s)
    s = _TRAILING_TEXT.sub("", s)
    s = _DEGREES.sub("", s)
    s = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", s)
    s = re.sub(r"\s+", " ", s).strip()
    return re.sub(r"^([+-])\s+", r"\1", s)


def _strip_decorations(s: str) -> str:
    s = re.sub(r"^[A-Za-z](?:_\{?\w+\}?)?\s*=\s*(?=[-+\d.\\$])", "", s)  # "x = 3", "x_2 = 3" read as 3
    s = _CURRENCY.sub("", s)
    for _ in range(3):
        s2 = _TEXT_WRAP.sub(r"\1", s).strip()
        s2 = re.sub(r"^\{(.*)\}$", r"\1", s2).strip()
        s2 = re.sub(r"^\[([^\[\],;]*)\]$", r"\1", s2).strip()  # `[45 degrees]`: one value in brackets
        s2 = _TRAILING_UNIT.sub("", s2).strip()
        s2 = _TRAILING_WORDS.sub("", s2).strip()
        s2 = _CURRENCY.sub("", s2)
        if s2 == s:
            break
        s = s2
    return s


def to_number(answer: str) -> Number | None:
    """The exact value of a plain-number answer, or None if it is anything else."""
    if len(answer) > MAX_DIGITS:
        return None
    s = _strip_decorations(normalize(answer))
    if re.fullmatch(r"[+-]?\d{1,3}(?: \d{3})+(?:\.\d+)?", s):  # "1 000 000": spaces between groups
        s = s.replace(" ", "")
    percent = False
    if s.endswith("%"):
        s, percent = s[:-1].strip(), True
    elif s.lower().endswith("percent"):
        s, percent = s[: -len("percent")].strip(), True
    value = _read_value(s)
    if value is None:
        return None
    places = len(m.group(1)) if _NUMBER.fullmatch(s) and (m := re.search(r"\.(\d+)", s)) else 0
    return Number(value[0], percent, value[1], places)


def _read_value(s: str) -> tuple[Fraction, bool] | None:
    if m := _NUMBER.fullmatch(s):
        return Fraction(m.group(0)), "." in s
    if m := _FRAC.fullmatch(s):
        num, den = int(m.group(2) or m.group(3)), int(m.group(4) or m.group(5))
        return _ratio(-num if m.group(1) == "-" else num, den)
    if m := _SLASH.fullmatch(s):
        return _ratio(int(m.group(1)), int(m.group(2)))
    m = _SCI.fullmatch(s) or _E_NOTATION.fullmatch(s)
    if m:
        return Fraction(m.group(1)) * Fraction(10) ** int(m.group(2)), True
    if m := _REPEATING.fullmatch(s):
        return _repeating(*m.groups()), False
    return None


def _repeating(sign: str, whole: str, fixed: str, period: str) -> Fraction:
    """0.1\\overline{6} = 1/6: the fixed digits plus the period repeated forever."""
    value = Fraction(int(whole or "0")) + (Fraction(int(fixed), 10 ** len(fixed)) if fixed else 0)
    value += Fraction(int(period), (10 ** len(period) - 1) * 10 ** len(fixed))
    return -value if sign == "-" else value


def _ratio(num: int, den: int) -> tuple[Fraction, bool] | None:
    return (Fraction(num, den), False) if den != 0 else None


def _round(x: Fraction, places: int = ROUND_PLACES) -> Fraction:
    return Fraction(round(x * 10**places), 10**places)


def same_when_rounded(a: Fraction, b: Fraction) -> bool:
    """Whether a and b agree to ROUND_PLACES decimal places (math-verify's float rule)."""
    return _round(a) == _round(b)


def _terminates(x: Fraction) -> bool:
    d = x.denominator
    for p in (2, 5):
        while d % p == 0:
            d //= p
    return d == 1


def _values_equal(a: Fraction, a_dec: bool, b: Fraction, b_dec: bool) -> bool:
    if a == b:
        return True
    # A decimal stands for a non-terminating fraction only when rounded, as in math-verify.
    if (a_dec and not _terminates(b)) or (b_dec and not _terminates(a)):
        return _round(a) == _round(b)
    return False


def numbers_equal(pred: Number, ref: Number) -> bool:
    """Equality of two plain numbers, with percentages read either way. Two decimals that both
    carry at least ROUND_PLACES digits (`0.0666668`, `0.066666793`) are two roundings of one value
    and are equal when they agree to ROUND_PLACES places; a shorter decimal is read exactly."""
    if min(pred.places, ref.places) >= ROUND_PLACES and not (pred.percent or ref.percent):
        return same_when_rounded(pred.value, ref.value)
    preds = [(pred.value, pred.decimal)]
    if pred.percent:
        preds.append((pred.value / 100, True))
    refs = [(ref.value, ref.decimal)]
    if ref.percent:
        refs.append((ref.value / 100, True))
    return any(_values_equal(p, pd, r, rd) for p, pd in preds for r, rd in refs)


_INFINITY = {"\\infty": "inf", "+\\infty": "inf", "-\\infty": "-inf", "\\infinity": "inf"}


def _element(text: str) -> tuple[str, Fraction] | None:
    """One number (or ±infinity) inside a set, interval or tuple."""
    t = text.strip()
    if t in _INFINITY:
        return ("inf", Fraction(1 if _INFINITY[t] == "inf" else -1))
    n = to_number(t)
    if n is None or n.percent:
        return None
    return ("num", n.value)


def to_structure(answer: str) -> tuple[str, tuple] | None:
    """A set `\\{1, 2\\}`, a bracketed pair or tuple `(0, 1]`, or a bare list `1, 2` of plain
    numbers, as (shape, elements); None for anything else (a union, a matrix, symbols)."""
    s = normalize(answer)
    if len(s) > MAX_DIGITS or "\\cup" in s or "\\cap" in s:
        return None
    shape = "list"
    if s.startswith("\\{") and s.endswith("\\}"):
        shape, s = "set", s[2:-2]
    elif s[:1] in "([" and s[-1:] in ")]" and s.count("(") + s.count("[") == 1:
        shape, s = s[0] + s[-1], s[1:-1]
    elif s.count(",") == 0:
        return None
    if any(c in s for c in "()[]{}") and shape != "set":
        return None
    parts = [_element(p) for p in s.split(",")]
    if not parts or any(p is None for p in parts):
        return None
    if shape in ("set", "list"):
        return "set", tuple(sorted(set(parts)))  # type: ignore[arg-type]
    return shape, tuple(parts)


def structures_equal(pred: tuple[str, tuple], ref: tuple[str, tuple]) -> bool | None:
    """Equal shapes compare element by element; different shapes are left to sympy (None)."""
    brackets = len(pred[0]) == 2 and len(ref[0]) == 2  # (a, b], [a, b), ... compare as they stand
    if not brackets and (pred[0] != ref[0] or (pred[0] == "set" and len(pred[1]) == 1 != len(ref[1]))):
        return None
    return pred == ref


def fast_equal(pred: str, ref: str) -> bool | None:
    """True/False when both answers are plain numbers (or identical text); None when undecided."""
    pred_n, ref_n = normalize(pred), normalize(ref)
    if pred_n == ref_n:
        return True
    if "=" in ref_n:  # an equation reference: variable names matter, sympy decides
        return None
    words = _text_key(pred), _text_key(ref)
    if words[0] is not None and words[1] is not None:
        # Word answers ("Even", "(C)", "Evelyn") compare as words; one letter against a word
        # (a variable against a name) is left to math-verify.
        if words[0] == words[1]:
            return True
        if len(words[0]) > 1 and len(words[1]) > 1:
            return False
    p, r = to_number(pred), to_number(ref)
    if p is not None and r is not None:
        return numbers_equal(p, r)
    if p is None and r is None and "," in pred_n and "," in ref_n:
        ps, rs = to_structure(pred), to_structure(ref)
        if ps is not None and rs is not None:
            return structures_equal(ps, rs)
    return None


_ASSIGNMENT = re.compile(r"([A-Za-z])\s*=\s*([^=<>]+)")


def number_vs_shape(pred: str, ref: str) -> bool | None:
    """A plain-number answer against a set, interval, tuple, matrix or `x = number` reference.

    A number equals a one-element set holding it and the right side of `x = number`; it never
    equals an interval, a tuple, a set of several numbers or a matrix of several entries. None when
    `ref` is none of these.
    """
    number = to_number(pred)
    if number is None:
        return None
    assignment = _ASSIGNMENT.fullmatch(normalize(ref))
    if assignment:
        rhs = to_number(assignment.group(2))
        return numbers_equal(number, rhs) if rhs is not None else None
    ref_n = normalize(ref)
    if ref_n.startswith("\\begin{") and ("&" in ref_n or "\\\\" in ref_n):
        return False  # a matrix or vector of several entries
    shape = to_structure(ref)
    if shape is None:
        return None
    if shape[0] == "set" and len(shape[1]) == 1:
        kind, value = shape[1][0]
        return kind == "num" and numbers_equal(number, Number(value, False, False))
    return False
