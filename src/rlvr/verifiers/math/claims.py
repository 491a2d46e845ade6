"""What a reference or an answer claims, when it is written the way datasets and models write it
(issue 26). Each function maps one string to another spelling of the same claim:

- `reference_form`: a dataset's reference as the verifier reads it: Python or plain-text syntax
  (`2*pi`, `sqrt(a^2+b^2)`, `2**(1/4)`) as LaTeX, MATH's `11,\\! 111` groups joined, an equation
  with the value on the left (`2=x`) turned round, an option with its text (`(D) Alina`) as the
  option label, and a sentence ("the answer is 0.6666667") as the answer it states;
- `equation_claim`: an answer closing an equation whose left side is a named quantity
  (`\\lim_{x\\to0}\\frac{\\sin x}{x} = 1`, `\\|\\vec v\\| = \\sqrt{a^2+b^2}`) claims its right side,
  against a reference that is no equation; a left side without variables (`1+1 = 3`) is a numeric
  claim and is kept whole, so a false one still scores 0;
- `split_approx`: `\\frac{\\sqrt3}{3} \\approx 0.577` → the exact value, which is the claim (as in
  math-verify, the approximation is not read: only the exact value can earn the reward, so writing
  a second value after `\\approx` gains nothing); `x \\approx 11` → `x = 11`;
- `chosen_options`: the option letters a multiple-choice answer picks, those it rules out
  ("D, it can't be A or B", "B。不是 A", "C non A") left out.

Nothing here decides equality.
"""

from __future__ import annotations

import re
from typing import Callable

_FUNCS = "sqrt|sin|cos|tan|cot|sec|csc|arcsin|arccos|arctan|log|ln|exp|pi"
_PY_HINT = re.compile(rf"(?<=[\w)])\*\*|\^\s*\(|(?<![\\A-Za-z])(?:{_FUNCS})(?![A-Za-z])|\d\s*\*\s*[A-Za-z(]")
_OPTION_TEXT = re.compile(r"\(?([A-E])\)\s+\S.*|([A-E])[.:]\s+\S.*", re.DOTALL)
_SENTENCE = re.compile(r"(?:[A-Za-z]{2,}\W+){2,}")


def _match_paren(s: str, at: int) -> int:
    depth = 0
    for i in range(at, len(s)):
        depth += {"(": 1, ")": -1}.get(s[i], 0)
        if depth == 0:
            return i
    return -1


def _python_to_latex(s: str) -> str:
    """`2**(1/4)` → `2^{(1/4)}`, `sqrt(x)` → `\\sqrt{x}`, `pi` → `\\pi`, `2*pi` → `2 \\cdot \\pi`."""
    out, i = [], 0
    while i < len(s):
        prev = s[i - 1] if i else ""
        m = (re.match(r"\*\*\s*", s[i:]) if prev.isalnum() or prev == ")" else None) \
            or re.match(r"\^\s*(?=\()|sqrt\s*(?=\()", s[i:])
        if m and not (m.group(0).startswith("sqrt") and (prev.isalpha() or prev == "\\")):
            open_at = i + m.end()
            if s[open_at:open_at + 1] == "(" and (close := _match_paren(s, open_at)) > 0:
                inner = _python_to_latex(s[open_at + 1:close])
                out.append(f"\\sqrt{{{inner}}}" if m.group(0).startswith("sqrt") else f"^{{({inner})}}")
                i = close + 1
                continue
            if m.group(0).startswith("**"):
                out.append("^")
                i += m.end()
                continue
        out.append(s[i])
        i += 1
    text = "".join(out)
    text = re.sub(rf"(?<![\\A-Za-z])({_FUNCS[5:]})(?![A-Za-z])", r"\\\1", text)  # not sqrt: done above
    return re.sub(r"\s*\*\s*", r" \\cdot ", text)


def _sides(s: str) -> list[str]:
    depth, start, sides = 0, 0, []
    for i, c in enumerate(s):
        depth += {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}.get(c, 0)
        if c == "=" and depth == 0 and s[i - 1:i] not in "<>!=" and s[i + 1:i + 2] != "=":
            sides.append(s[start:i].strip())
            start = i + 1
    return sides + [s[start:].strip()]


def reference_form(ref: str, stated: Callable[[str], list[str]] | None = None) -> str:
    """The reference as the verifier compares it (see the module docstring). `stated` reads the
    answer a sentence states (the extraction of `extract`), passed in to keep layers flat."""
    s = re.sub(r"(?<=\d),\\!\s*(?=\d{3}(?!\d))", "", ref.strip())
    if m := _OPTION_TEXT.fullmatch(s):
        return f"({m.group(1) or m.group(2)})"
    sentence = _SENTENCE.match(s) or re.match(r"(?:final\s+)?answer\s*[:=]", s, re.IGNORECASE)
    if stated is not None and sentence and re.search(r"[\d\\$]", s):
        found = stated(s)
        if len(found) == 1 and found[0] != s:
            s = found[0]
    if "\\" not in s and _PY_HINT.search(s):
        s = _python_to_latex(s)
    sides = _sides(s)
    if len(sides) == 2 and re.fullmatch(r"[A-Za-z](?:_\{?\w+\}?)?", sides[1]) \
            and not re.fullmatch(r"[A-Za-z](?:_\{?\w+\}?)?", sides[0]):
        s = f"{sides[1]} = {sides[0]}"  # `2=x` states x = 2
    return s


def _has_variable(s: str) -> bool:
    """Whether `s` names something (a letter outside LaTeX commands: `x`, `AB`, `\\text{Area}`)."""
    return bool(re.search(r"[A-Za-z]", re.sub(r"\\[A-Za-z]+", " ", s)))


def equation_claim(answer: str, reference: str) -> str:
    """`lhs = rhs` → `rhs` when the reference is no equation and lhs names a quantity (holds a
    variable and is more than one: `x = 5` stays an assignment, compared as math-verify does)."""
    if "=" in reference or "=" not in answer:
        return answer
    sides = _sides(answer)
    if len(sides) != 2 or not all(sides):
        return answer
    lhs, rhs = sides
    if re.fullmatch(r"[A-Za-z](?:_\{?\w+\}?)?", lhs) or not _has_variable(lhs):
        return answer
    if re.search(r"[<>]|\\[lg]eq?(?![A-Za-z])|\\ne(?![A-Za-z])", rhs):
        return answer
    return rhs


_APPROX = re.compile(r"\\approx|≈|\\simeq")
_NUMBER = re.compile(r"\s*[+-]?\d+(?:\.\d+)?\s*(?:\\?%)?\s*\.?")


def split_approx(answer: str) -> str:
    """The claim of `exact \\approx number`: the exact part (`x \\approx 11`, a lone name, gives `x = 11`)."""
    parts = _APPROX.split(answer)
    if len(parts) != 2 or not parts[0].strip() or not _NUMBER.fullmatch(parts[1]):
        return answer
    head = parts[0].strip()
    if re.fullmatch(r"[A-Za-z](?:_\{?\w+\}?)?", head):
        return f"{head} = {parts[1].strip().rstrip('.')}"
    return head.rstrip("=").strip()


_NEGATION = re.compile(
    r"(?:(?<![A-Za-z])(?:not|never|isn'?t|is\s+not|can'?t(?:\s+be)?|cannot(?:\s+be)?|can\s+not|"
    r"rather\s+than|instead\s+of|excluding|except|non|pas|ni|nicht|no\s+es)(?![A-Za-z])"
    r"|不是|而非|并非|非|排除)", re.IGNORECASE)
_CLAUSE_END = re.compile(r"[.;!?。；！？\n]|,(?=\s*(?:so|but|and|thus|hence|donc|mais)\b)")
# "A nice problem.": the article, not option A ("A is correct" and "(A) works" are the option).
_ARTICLE = re.compile(r"A\s+(?!(?:is|was|and|or|since|because|as|being|it)(?![A-Za-z]))[a-z]{2,}")
_LETTER = re.compile(r"(?<![A-Za-z\\])\(?([A-E])\)?(?![A-Za-z])")


def chosen_options(text: str, always: bool = False) -> list[str] | None:
    """The distinct option letters `text` picks, in order, with the letters a negation rules out
    (up to the end of its clause) left out; None when `text` holds no negation (nothing to do),
    unless `always` (a closing line read for its letters: "The correct choice is B.")."""
    if not always and not _NEGATION.search(text):
        return None
    keep, i = [], 0
    for m in _NEGATION.finditer(text):
        keep.append(text[i:m.start()])
        end = _CLAUSE_END.search(text, m.end())
        i = end.start() if end else len(text)
        if i < m.end():
            i = m.end()
    keep.append(text[i:])
    kept = " ".join(keep)
    letters = [m.group(1) for m in _LETTER.finditer(kept) if not _ARTICLE.match(kept, m.start())]
    return list(dict.fromkeys(letters))
