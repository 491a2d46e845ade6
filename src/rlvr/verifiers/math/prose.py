"""Reading a final answer out of running text: runs of boxes and the closing sentence (issue 17).

- `MATH` finds inline and display math. A closing `$` never stands before a digit, math that starts
  with a number ends after a non-space (after pandoc's rule, which currency amounts break), and
  `\\$` is an escaped dollar, so "He spent $20 on lunch and $15 on dinner" holds no math, while
  `$\\$18$` holds `\\$18` and `$ \\frac{1}{2} $` holds `\\frac{1}{2}`.
- `last_box_run`: of several boxes, the final answer is the last run of boxes joined only by
  separators (`\\boxed{2} and \\boxed{3}`, `$x=\\boxed{2}$, $y=\\boxed{3}$`); a box that prose
  separates from the run is working (`$x = \\boxed{4}$, so $x^2 = \\boxed{16}$`), as in
  math-verify. A connective or condition ("or", "otherwise", "maybe", "if", "else") between two
  different boxes anywhere in the region is a hedge.
- `closing_sentence` / `sentence_items`: with no box, tag or answer phrase, the last sentence that
  holds a number or math, and the answer values in it.

Not guaranteed: that a sentence splitter this simple reads every prose ending a human would; it
errs towards the last value, never towards accepting several.
"""

from __future__ import annotations

import re

from rlvr.verifiers.math.latex import _CONNECTIVE, _TEXT_CMD, box_spans, strip_delimiters

MATH = re.compile(
    r"\$\$(.+?)\$\$"
    r"|(?<![\\$])\$(?!\$)(?:(?=\s*\d)((?:\\.|[^$\\])+?)(?<!\s)|(?!\s*\d)((?:\\.|[^$\\])+?))\$(?!\d)"
    r"|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.DOTALL)
_NUM = re.compile(r"(?<![A-Za-z0-9_.^])-?\d[\d,]*(?:\.\d+)?(?:\s*/\s*\d+)?(?:\s*%)?")
_OPTION = re.compile(r"(?<![\w\\])\(([A-E])\)(?!\w)")  # "The correct option is (B)."
_CURRENCY = re.compile(r"(?:US)?\\?\$(?=\s?\d)")
# What may stand between two boxes of one answer: spacing, math delimiters, commas, "and", and
# the name the next box assigns (`$x = \boxed{2}$, $y = \boxed{3}$`).
_JOIN = re.compile(
    r"(?:\s|\$|[,;&]|\\[\[\]()]|\\\\|\\q?quad(?![A-Za-z])|\\[,;! ]|and(?![A-Za-z])|"
    r"\\text\{\s*and\s*\}|[A-Za-z](?:_\{?\w+\}?)?(?:\^\{?\w+\}?)?\s*=)*")
_MAX_JOIN_CHARS = 200
# Between two different values, a condition offers both: "\boxed{5} if ..., else \boxed{6}".
_CONDITIONAL = re.compile(r"(?<![A-Za-z\\])(?:if|else|unless|whereas|depending|instead|when|whether|"
                          r"might|could|also)(?![A-Za-z])", re.IGNORECASE)


def _offers_both(gap: str) -> bool:
    plain = _TEXT_CMD.sub(r" \1 ", gap)
    return bool(_CONNECTIVE.search(plain) or _CONDITIONAL.search(plain))


# A relation between two boxes (`\boxed{0.5} = \boxed{\frac13}`) offers both as the answer; a
# name the next box assigns (`$x = \boxed{2}$, $y = \boxed{3}$`) is no relation between them.
_RELATION = re.compile(r"=|<|>|\\(?:approx|ne|neq|le|ge|leq|geq|equiv|sim|simeq)(?![A-Za-z])|≈|≠")
_NAME = re.compile(r"[A-Za-z](?:_\{?\w+\}?)?(?:\^\{?\w+\}?)?\s*=")


def _relates(gap: str) -> bool:
    return bool(_RELATION.search(_NAME.sub(" ", gap)))


def math_bodies(text: str) -> list[tuple[int, int, str]]:
    """(start, end, content) of each math span in `text`."""
    return [(m.start(), m.end(), next(g for g in m.groups() if g is not None))
            for m in MATH.finditer(text)]


def last_box_run(region: str) -> tuple[list[str], bool]:
    """The contents of the last run of joined boxes in `region`, and whether two different boxes
    anywhere in it are joined by a connective (a hedge: `\\boxed{5} or \\boxed{6}`)."""
    spans = box_spans(region)
    if not spans:
        return [], False
    run = [spans[0][2]]
    hedged = False
    for (_, end, before), (start, _, content) in zip(spans, spans[1:]):
        gap = region[end:start]
        if before != content and (_offers_both(gap) or _relates(gap)):
            hedged = True
        if len(gap) <= _MAX_JOIN_CHARS and _JOIN.fullmatch(gap):
            run.append(content)
        else:
            run = [content]
    return run, hedged


def closing_sentence(region: str) -> str:
    """The last sentence of the region that holds a number, math or an option label `(B)`
    (trailing remarks such as "I hope it is correct." or a stray chat token are skipped). Math
    stays whole; a dollar sign before a number outside math is currency and reads as "USD"."""
    maths: list[str] = []

    def hold(m: re.Match) -> str:
        maths.append(m.group(0))
        return f"\x00{len(maths) - 1}\x00"

    held = _CURRENCY.sub("USD ", MATH.sub(hold, region[-4000:]))
    sentences = re.split(r"(?<=[.!?])\s+|(?<=[。！？])|\n+", held)
    for sentence in reversed(sentences):
        if re.search(r"\x00|\d", sentence) or _OPTION.search(sentence):
            return re.sub(r"\x00(\d+)\x00", lambda m: maths[int(m.group(1))], sentence)
    return ""


def sentence_items(sentence: str) -> list[str]:
    """The answer values in a closing sentence: its math (lone variable names are labels, not
    values) and its plain numbers. Values listed side by side ("3, 4", "3 or 4") all count, so a
    hedge stays a hedge; otherwise the last value is the answer ("The 3 friends pay 18 each")."""
    items: list[tuple[int, int, str]] = []
    for start, end, body in math_bodies(sentence):
        body = strip_delimiters(body)
        if body and not re.fullmatch(r"[A-Za-z](?:_\{?\w+\}?)?|\\[A-Za-z]+", body):
            items.append((start, end, body))
    outside = MATH.sub(lambda m: " " * len(m.group(0)), sentence)
    for m in _NUM.finditer(outside):
        items.append((m.start(), m.end(), m.group(0).strip()))
    for m in _OPTION.finditer(outside):
        items.append((m.start(), m.end(), m.group(0)))
    items.sort()
    if not items:
        return []
    if len(items) > 1 and _CONNECTIVE.search(_TEXT_CMD.sub(r" \1 ", outside)):
        return [body for _, _, body in items]  # "5, or maybe 6": every value is offered
    if any(_offers_both(sentence[a[1]:b[0]]) for a, b in zip(items, items[1:]) if a[2] != b[2]):
        return [body for _, _, body in items]  # "5 if we count the ends, else 6"
    run = [items[-1]]
    for item in reversed(items[:-1]):
        gap = sentence[item[1]:run[0][0]]
        if not re.fullmatch(r"[\s,;]*(?:(?:and|or|\\text\{\s*(?:and|or)\s*\})[\s,;]*)?", gap, re.I):
            break
        run.insert(0, item)
    return [body for _, _, body in run]
