"""Find the final answer in a model response: the extraction policies of the math verifier.

Only the final-answer region counts: the text after the last `</think>` (a response whose `<think>`
never closes has no final region). Within it a policy collects candidate answer strings:

- "boxed":      the last run of `\\boxed{...}` / `\\fbox{...}` joined only by separators (a nested
                box counts once, by its content; see `prose.last_box_run`); an empty last
                box is no answer, whatever the prose says;
- "answer_tag": every `<answer>...</answer>`; a box inside a tag narrows the tag to the box;
- "phrase":     the last "answer is ..." / "answer: ..." phrase (also French, Spanish, German,
                Russian, Chinese, Japanese) or GSM8K's `#### ` marker, up to the end of its line;
- "whole":      the whole region, for responses that are only an answer (`$\\frac{1}{2}$`, `x = 3`);
- "auto":       the first of answer_tag, boxed, phrase that finds something, else "whole" when the
                region is a bare answer (one math block, or a short string with at most one word),
                else the values of the closing sentence (`prose`).

All scanning is linear in the response length (brace matching by hand, no backtracking regex over
the whole text). What this module does not do: decide whether two candidates are the same value;
`split_parts` only separates the top-level parts of one candidate ("3 or 4", "3, 4").
"""

from __future__ import annotations

import re

from rlvr.verifiers.math.latex import (_CONNECTIVE, _DELIMS, _TEXT_CMD, _match_brace,  # noqa: F401
                                       box_spans, boxed_contents, strip_delimiters)
from rlvr.verifiers.math.prose import MATH, closing_sentence, last_box_run, math_bodies, sentence_items

POLICIES = ("auto", "boxed", "answer_tag", "phrase", "whole")
_WHOLE_MAX_CHARS = 300      # a "whole response" answer longer than this is prose, not an answer
_AUTO_WHOLE_MAX_CHARS = 80  # auto mode only reads short bare responses as answers
_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
# The answer phrase in English, French, Spanish, German and Chinese ("la réponse est", "答案是").
_PHRASE = re.compile(r"(?:final\s+answer|answer|r[ée]ponse(?:\s+finale)?|respuesta|antwort)\s*"
                     r"(?:(?:is|ist|est|es)(?![A-Za-z])|:|=)\s*:?\s*|^[ \t]*####[ \t]*"
                     r"|答案\s*(?:是|为|為|[:：])\s*|(?:故|应|答案)选\s*[:：]?\s*|答え\s*(?:は|[:：])\s*"
                     r"|ответ\s*[:：]\s*|antwort\s+lautet\s*:?\s*",
                     re.IGNORECASE | re.MULTILINE)


def final_region(text: str) -> str:
    """The part of `text` where a final answer may stand."""
    lower = text.lower()
    close = lower.rfind("</think>")
    if close >= 0:
        return text[close + len("</think>"):]
    if "<think>" in lower:
        return ""
    return text


def _tag_candidates(region: str) -> list[str]:
    out: list[str] = []
    for m in _ANSWER_TAG.finditer(region):
        inner = m.group(1)
        boxes = boxed_contents(inner)
        out.extend(boxes if boxes else [strip_delimiters(inner)])
    return out


_FILLER = re.compile(r"^(?:therefore|thus|hence|so|then|simply|just|donc|alors|ainsi|finalement|"
                     r"entonces|por\s+lo\s+tanto|also|daher)(?![A-Za-z])\s*,?\s*", re.IGNORECASE)


def _phrase_candidates(region: str) -> list[str]:
    matches = list(_PHRASE.finditer(region))
    if not matches:
        return []
    last = matches[-1]
    rest = re.sub(r"^[}*:：\s]+", "", region[last.end():])  # "**Answer:** 6", "\\textbf{Answer:} 6"
    line = rest.split("\n", 1)[0]
    line = _FILLER.sub("", line)  # "the answer is therefore 12", "la réponse est donc 12"
    boxes = boxed_contents(line)
    if boxes:
        return boxes
    # A sentence ends at ". " followed by a capital letter (or at a CJK full stop); decimals keep
    # their point.
    line = re.split(r"\.\s+(?=[A-Z])|。", line, maxsplit=1)[0]
    if line.count("**") == 1:  # "answer is **(B)**.": the opening ** went with the phrase
        line = re.sub(r"\*\*\s*\.?\s*$", "", line)
    return [strip_delimiters(line)]


def _whole_candidates(region: str, max_chars: int, bare_only: bool = False) -> list[str]:

    s = strip_delimiters(region)
    if not s or len(s) > max_chars or (bare_only and not _looks_bare(s)):
        return []
    # "The point is $(2, 3)$": the math in a short sentence is its answer.
    return [body for _, _, body in math_bodies(s)] or [s]


def extract_candidates(text: str, policy: str = "auto") -> tuple[list[str], str]:
    """Candidate answers in the final region of `text` under `policy`, and the policy that found them.

    Empty candidates are dropped; an empty list means no answer was found.
    """
    if policy not in POLICIES:
        raise ValueError(f"unknown extraction policy {policy!r}; known: {', '.join(POLICIES)}")

    region = final_region(text)
    boxes, hedged = last_box_run(region)
    finders = {
        "answer_tag": lambda: _tag_candidates(region),
        "boxed": lambda: boxes,
        "phrase": lambda: _phrase_candidates(region),
        "whole": lambda: _whole_candidates(region, _WHOLE_MAX_CHARS),
    }
    order = ["answer_tag", "boxed", "phrase"] if policy == "auto" else [policy]
    for name in order:
        if name == "boxed" and boxes and not boxes[-1].strip():
            return [], name  # the last box is empty: the answer the format asks for is missing
        found = [c for c in map(strip_delimiters, finders[name]()) if c]
        if found and name == "boxed" and (hedged or _hedge_after_box(region)):
            found.append(_HEDGE_MARK)
        if found and name == "phrase" and policy == "auto" and _is_prose(found[0]):
            found = sentence_items(found[0])
        if found:
            return found, name
    if policy == "auto":
        block = _single_math_block(region)
        if block:
            return [block], "whole"
        found = _whole_candidates(region, _AUTO_WHOLE_MAX_CHARS, bare_only=True)
        if found:
            return found, "whole"
        return sentence_items(closing_sentence(region)), "sentence"
    return [], policy


def _looks_bare(answer: str) -> bool:
    """A short string (at most five tokens) with a digit or LaTeX, one sentence, and at most one
    word outside math and LaTeX is a bare answer: `x = 3`, `18 dollars`, `$3$ and $4$`. Prose
    (`The sum is 10.`, `First $x=2$. The sum is 10.`) is read by its closing sentence instead."""

    if len(answer) > 3 and not re.search(r"[\d\\]", answer) or len(answer.split()) > 5:
        return False
    outside = MATH.sub(" ", answer)
    if re.search(r"[.!?]\s", outside) or re.search(r"[^\W\d_A-Za-z]{2,}", outside):
        return False  # a second sentence, or words of a script without spaces ("计划的比例为13/28")
    words = re.findall(r"(?<!\\)\b[A-Za-z]{3,}\b", re.sub(r"\\[A-Za-z]+(\{[^{}]*\})?", " ", outside))
    return len(words) <= 1


_SEPARATORS = re.compile(
    r"\\text\{\s*(?:or|and)\s*\}|\\(?:q)?quad|\\mathrm\{\s*(?:or|and)\s*\}|\bor\b|\band\b|[,;]")


def split_parts(answer: str) -> list[str]:
    """Top-level parts of one answer: separators inside (), [], {} or an environment do not split.

    A comma between digit groups of three (`1,000`) and `{,}` are thousands separators, not lists.
    """
    s = answer.replace("{,}", "")
    s = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", s)
    parts: list[str] = []
    depth = 0
    start = 0
    i = 0
    while i < len(s):
        c = s[i]
        if c == "\\" and s.startswith(("\\{", "\\}"), i):
            depth += 1 if s[i + 1] == "{" else -1
            i += 2
            continue
        if c == "\\" and s.startswith(("\\begin", "\\left"), i):
            depth += 1
        elif c == "\\" and s.startswith(("\\end", "\\right"), i):
            depth -= 1
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif depth <= 0 and c in "\\,;ao":
            m = _SEPARATORS.match(s, i)
            if m and (c in ",;\\" or _word_boundary(s, i)):
                parts.append(s[start:i])
                start = i = m.end()
                continue
        i += 2 if c == "\\" and i + 1 < len(s) and not s[i + 1].isalpha() else 1
    parts.append(s[start:])
    return [p.strip() for p in parts if p.strip()]


def _word_boundary(s: str, i: int) -> bool:
    return i == 0 or not (s[i - 1].isalnum() or s[i - 1] == "\\")


# ---- hedges, closing sentences (issue 17) -------------------------------------------------------
# A candidate that hedges is replaced by this marker, which equals no reference: the verifier
# reports it as a second answer.
_HEDGE_MARK = "\\text{<hedge>}"
_WORD = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{2,}(?![A-Za-z])")
_LATEX_CMD = re.compile(r"\\[A-Za-z]+")


def _top_level_split(s: str, sep: str) -> list[str]:
    """`s` split on `sep` where no bracket or brace is open."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(s):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == sep and depth == 0:
            parts.append(s[start:i])
            start = i + 1
    parts.append(s[start:])
    return [p.strip() for p in parts]


def _parentheticals(s: str) -> list[str]:
    """Contents of `( ... )` groups that follow other content (`5 (or 6)`, not `(1, 2)`)."""
    out, depth, start = [], 0, -1
    for i, c in enumerate(s):
        if c == "(":
            if depth == 0:
                start = i
            depth += 1
        elif c == ")" and depth > 0:
            depth -= 1
            if depth == 0 and s[:start].strip() and s[start - 1:start] in (" ", "}", "~"):
                out.append(s[start + 1:i])
    return out


def is_hedge(candidate: str) -> bool:
    """Whether one candidate offers alternatives: a connective ("or", "\\lor", "either", "maybe")
    anywhere in it, parts joined by "/" that are each a claim (`x=5 / x=6`) or a word, or a
    parenthetical remark holding a number and words (`5 (i.e. 6)`, `5 (\\approx 6)`)."""
    plain = _TEXT_CMD.sub(r" \1 ", candidate)
    if _CONNECTIVE.search(plain):
        return True
    slash = _top_level_split(candidate, "/")
    if len(slash) > 1 and all(p and ("=" in p or re.fullmatch(r"(?:\\text\{)?\s*[A-Za-z]{2,}\s*\}?", p))
                              for p in slash):
        return True
    for inner in _parentheticals(plain):
        words = _WORD.findall(_LATEX_CMD.sub(" ", inner))
        has_number = re.search(r"(?<![\^_{\w.])\d", inner)
        if has_number and (words or "\\approx" in inner or "=" in inner):
            return True
    return False


def _hedge_after_box(region: str) -> bool:
    """`\\boxed{5} (or 6)` / `\\boxed{5} or \\boxed{6}`: a connective right after the last box."""
    at = max(region.rfind("\\boxed"), region.rfind("\\fbox"))
    brace = region.find("{", at)
    end = _match_brace(region, brace) if at >= 0 and brace >= 0 else -1
    if end < 0:
        return False
    tail = re.sub(r"^[\s$.)\\\]]*", "", region[end + 1:end + 40])
    return bool(re.match(r"\(?\s*(?:\\text\{\s*)?(?:or|either|maybe|possibly|perhaps)\b", tail, re.I))


def _is_prose(candidate: str) -> bool:
    """A phrase candidate that is a sentence (`The largest $n$ is 34`), not a bare answer."""
    outside = re.sub(r"\$[^$]*\$|\\\(.*?\\\)|\\\[.*?\\\]|\\(?:begin|end)\{\w*\}", " ", candidate)
    return len(_WORD.findall(_LATEX_CMD.sub(" ", outside))) >= 2 and bool(re.search(r"[\d$\\]", candidate))


def _single_math_block(region: str) -> str:
    """The content when the whole region is one display or inline math block (`$$f(y) = y$$`)."""
    s = region.strip().rstrip(".").strip()
    for left, right in _DELIMS[:4]:
        if s.startswith(left) and s.endswith(right) and len(s) > len(left) + len(right):
            inner = s[len(left):len(s) - len(right)]
            bare = inner.replace("\\$", "")  # `$\$18$`: an escaped dollar is currency
            if right not in bare and left not in bare and len(inner) <= _WHOLE_MAX_CHARS:
                return strip_delimiters(inner)
    return ""
