"""Instruction constraints (IFEval-style): checkable rules about the form of a response.

Constraints live in the data, as `problem.metadata["constraints"] = [{"type": ..., "args": {...}}]`
(or as `problem.reference` when that is such a list). Each type is a pure function
`(response, **args) -> bool` in `CHECKS`; `check_reference` validates types and arguments at load
time. The reward is 1 when all constraints hold (`reward="all"`, the default) or the fraction that
hold (`reward="fraction"`; per problem via `metadata["constraint_reward"]`); `details["failed"]`
lists the failed types.

Counting rules (documented because they decide rewards; docs/verifiers/constraints.md sets each
beside IFEval's): words are `\\w+` runs (IFEval's tokenizer); sentences end at `.`, `!` or `?`
(closing quotes, brackets or `*` emphasis may follow) before whitespace, not after Mr./Mrs./Ms./
Dr./Prof./St./Jr./Sr./vs./e.g./i.e. or an initial, nor at a period before a lower-case word (in a
text with capitals: an all-lower-case text breaks there), after a dotted initialism (U.S.) unless a
sentence starter follows, or a month before a number; paragraphs are split at `***` dividers when
the text has any (IFEval's rule; an empty one between two dividers fails the check), else at blank
lines; bullets are lines starting with `*`, `-` or `•` and a space; a placeholder is `[...]` with
something in it; a title is `<<...>>` with something in it; keywords are whole words, except at an
edge in or next to a script written without spaces (Han, kana, Thai, ...) and at the end next to
Hangul (particles attach). Language is read by `rlvr.verifiers.language` (fastText's lid.176,
langdetect where it is unsure; nothing is downloaded at run time); a text too short to tell ("und")
does not satisfy a `language` constraint. Not guaranteed: IFEval's exact sentence splitter (nltk
punkt) where it decides from word statistics (an ellipsis or a dotted initialism before a
capitalised word) or on abbreviations outside the list.
"""

from __future__ import annotations

import inspect
import json
import re
import unicodedata
from typing import Any, Callable, Sequence

from rlvr.types import Problem, Score
from rlvr.verifiers.language import char_script, detect_language

_RELATIONS: dict[str, Callable[[int, int], bool]] = {
    "at most": lambda x, n: x <= n, "at least": lambda x, n: x >= n, "exactly": lambda x, n: x == n,
    "less than": lambda x, n: x < n, "more than": lambda x, n: x > n,
}
_RELATION_ALIASES = {"at_most": "at most", "<=": "at most", "at_least": "at least", ">=": "at least",
                     "==": "exactly", "=": "exactly", "less_than": "less than", "<": "less than",
                     "more_than": "more than", ">": "more than"}


def _compare(count: int, relation: str, n: int) -> bool:
    return _RELATIONS[_RELATION_ALIASES.get(relation, relation)](count, n)


def count_words(text: str) -> int:
    return len(re.findall(r"\w+", text))


_ABBREVIATIONS = frozenset("mr mrs ms dr prof st jr sr vs e.g i.e".split())
# After a dotted initialism (U.S., U.K., a.m., Ph.D.) a capitalised word starts a sentence only if it
# is one of these: the sentence starters of nltk punkt's English model (IFEval's splitter), whose
# verdicts rlvr follows here ("The U.S. Army", "the U.K. Last year": one sentence).
_SENTENCE_STARTERS = frozenset(
    "this but though indeed both however some meanwhile i even most instead when despite these thus "
    "according although separately similarly in if yet he sales moreover while they many under since "
    "among so nonetheless nor nevertheless the there it".split())
_POSTSCRIPTS = frozenset({"p.s", "p.p.s"})  # labels: the note after one is a sentence of its own
_MONTHS = frozenset("jan feb mar apr jun jul aug sep sept oct nov dec".split())  # "Jan. 1": a date
# A stop, then closing quotes, brackets or markdown emphasis (`*`, `**`), then whitespace.
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])[\"'”’)\]*]*\s+")
_DIVIDER = re.compile(r"(?<!\S)\*\*\*(?!\S)")  # `***` standing alone, not `***bold***`


def _continues(piece: str, following: str, cased: bool = True) -> bool:
    """Whether the sentence ending `piece` with a stop goes on into `following`: after an
    abbreviation or an initial; after a period (an ellipsis, a number, an abbreviation not listed)
    before a lower-case word, in a text that uses capitals (`cased`: in an all-lower-case text no
    word is capitalised, so that rule would make every text one sentence); after a dotted
    initialism unless a sentence starter follows; after a month before a number."""
    if not piece.split():
        return False
    word = piece.rsplit(None, 1)[-1].lstrip("\"'“‘(*_`")
    last = word.lower().rstrip(".")
    if last in _ABBREVIATIONS or (len(last) == 1 and last.isalpha()):
        return True
    if not piece.endswith(".") or not following:
        return False
    head = following.lstrip("\"'“‘(").split(None, 1)
    nxt = head[0] if head else ""
    if nxt[:1].islower() and cased:
        return True
    if re.fullmatch(r"[A-Z]\w*(?:\.\w+)+\.", word) and last not in _POSTSCRIPTS:
        return nxt[:1].isupper() and re.sub(r"\W.*", "", nxt.lower()) not in _SENTENCE_STARTERS
    return last in _MONTHS and nxt[:1].isdigit()


def count_sentences(text: str) -> int:
    pieces = [p for p in _SENTENCE_BREAK.split(text.strip()) if p]
    cased = any(c.isupper() for c in text)
    ends = [i for i, p in enumerate(pieces)
            if i == len(pieces) - 1 or not _continues(p, pieces[i + 1], cased)]
    starts = [0] + [i + 1 for i in ends[:-1]]
    return sum(any(re.search(r"\w", p) for p in pieces[a:b + 1]) for a, b in zip(starts, ends))


def split_paragraphs(text: str) -> list[str]:
    """Paragraphs, stripped; an empty one between two `***` dividers is kept as ""."""
    pieces = _DIVIDER.split(text) if _DIVIDER.search(text) else re.split(r"\n\s*\n", text)
    pieces = [p.strip() for p in pieces]
    while pieces and not pieces[0]:
        pieces.pop(0)
    while pieces and not pieces[-1]:
        pieces.pop()
    return pieces


def word_count(response: str, relation: str, n: int) -> bool:
    return _compare(count_words(response), relation, n)


def sentence_count(response: str, relation: str, n: int) -> bool:
    return _compare(count_sentences(response), relation, n)


def paragraph_count(response: str, relation: str, n: int) -> bool:
    paragraphs = split_paragraphs(response)
    return all(paragraphs) and _compare(len(paragraphs), relation, n)


def json_format(response: str, required_keys: Sequence[str] = ()) -> bool:
    # Either fence may be missing (a truncated or half-fenced answer whose JSON still parses).
    body = re.sub(r"^```(?:json)?", "", response.strip(), flags=re.IGNORECASE)
    body = re.sub(r"```$", "", body.strip()).strip()
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return False
    if required_keys:
        return isinstance(value, dict) and all(k in value for k in required_keys)
    return True


# Scripts written without spaces between words: an edge of a keyword in one, or next to one, needs no
# word boundary (人工智能 in 人工智能正在…, ตลาดน้ำ in ไปตลาดน้ำกับ, AI in 使用AI技术). Korean
# writes spaces but attaches particles to the word (자전거를): after Hangul only the end is free.
_UNSPACED = frozenset({"CJK", "HIRAGANA", "KATAKANA", "KATAKANA-HIRAGANA", "THAI", "LAO", "KHMER",
                       "MYANMAR"})


def _may_break(left: str, right: str, *, end: bool) -> bool:
    """Whether a keyword may begin (end=False) or stop (end=True) between `left` and `right`."""
    if not (left.isalnum() or left == "_") or not (right.isalnum() or right == "_"):
        return True  # not both word characters: a boundary
    scripts = {char_script(left), char_script(right)}
    return bool(scripts & _UNSPACED) or (end and "HANGUL" in scripts)


def _keyword_count(response: str, keyword: str) -> int:
    """Case-blind occurrences as whole words, not overlapping (IFEval counts substrings: "cat" in
    "category"); where words are not separated by spaces, see `_UNSPACED`."""
    kw = keyword.strip()
    count, free_from = 0, 0
    for m in re.finditer(f"(?={re.escape(kw)})", response, re.IGNORECASE):
        i = m.start()
        j = i + len(kw)
        if i < free_from or j > len(response):
            continue
        before = response[i - 1] if i else " "
        after = response[j] if j < len(response) else " "
        if _may_break(before, response[i], end=False) and _may_break(response[j - 1], after, end=True):
            count, free_from = count + 1, j
    return count


def keywords_include(response: str, keywords: Sequence[str]) -> bool:
    return all(_keyword_count(response, k) > 0 for k in keywords)


def keywords_exclude(response: str, keywords: Sequence[str]) -> bool:
    return all(_keyword_count(response, k) == 0 for k in keywords)


def keyword_frequency(response: str, keyword: str, relation: str, n: int) -> bool:
    return _compare(_keyword_count(response, keyword), relation, n)


def letter_frequency(response: str, letter: str, relation: str, n: int) -> bool:
    return _compare(response.lower().count(letter.lower()), relation, n)


def letter_case(response: str, case: str, language: str | None = None) -> bool:
    """All cased letters in `case` (at least one); with `language`, also written in it (IFEval's
    change_case:english_lowercase / english_capital are `language="en"`)."""
    if case not in ("lower", "upper"):
        raise ValueError(f"case must be 'lower' or 'upper', got {case!r}")
    ok = response.islower() if case == "lower" else response.isupper()
    return ok and (language is None or _is_language(response, language))


def starts_with(response: str, text: str) -> bool:
    return response.strip().lower().startswith(text.strip().lower())


def ends_with(response: str, text: str) -> bool:
    # Surrounding double quotes are not part of the answer (IFEval strips them too).
    return response.strip().strip('"').lower().endswith(text.strip().lower())


def bullet_count(response: str, relation: str, n: int) -> bool:
    bullets = re.findall(r"^\s*(?:[*•]|-(?!-))\s+\S", response, re.MULTILINE)
    return _compare(len(bullets), relation, n)


def section_count(response: str, relation: str, n: int, splitter: str = "Section") -> bool:
    sections = re.split(rf"\s?{re.escape(splitter)}\s?\d+\s?", response)
    return _compare(len(sections) - 1, relation, n)


_COMMAS = frozenset(",\uff0c\u3001\u060c")  # ASCII, fullwidth, ideographic and Arabic commas


def no_commas(response: str) -> bool:
    return not _COMMAS.intersection(response)


def _blank(text: str) -> bool:
    """Only spaces (no-break ones too) and invisible format characters (zero-width space, BOM)."""
    return all(c.isspace() or unicodedata.category(c) == "Cf" for c in text)


def placeholders(response: str, n: int) -> bool:
    found = re.findall(r"\[([^\[\]\n]*)\]", response)
    return sum(not _blank(inner) for inner in found) >= n


def _is_language(response: str, code: str) -> bool:
    return detect_language(response) == code.lower().split("-")[0]  # "und" never equals a code


def language(response: str, language: str) -> bool:
    return _is_language(response, language)


def title(response: str) -> bool:
    return any(not _blank(m.group(1).strip("<>")) for m in re.finditer(r"<<([^\n]+?)>>", response))


CHECKS: dict[str, Callable[..., bool]] = {
    f.__name__: f for f in (word_count, sentence_count, paragraph_count, json_format,
                            keywords_include, keywords_exclude, keyword_frequency, letter_frequency,
                            letter_case, starts_with, ends_with, bullet_count, section_count,
                            no_commas, placeholders, language, title)
}


def validate(constraint: Any) -> str | None:
    """Why a constraint spec is unusable, or None when it is fine."""
    if not isinstance(constraint, dict) or "type" not in constraint:
        return f"constraint {constraint!r} is not a {{type, args}} object"
    kind, args = constraint["type"], constraint.get("args") or {}
    if kind not in CHECKS:
        return f"unknown constraint type {kind!r}; known: {', '.join(sorted(CHECKS))}"
    if not isinstance(args, dict):
        return f"constraint {kind!r}: args must be an object"
    try:
        inspect.signature(CHECKS[kind]).bind("", **args)
    except TypeError as exc:
        return f"constraint {kind!r}: {exc}"
    problem = _bad_args(kind, args)
    return None if problem is None else f"constraint {kind!r}: {problem}"


def _bad_args(kind: str, args: dict[str, Any]) -> str | None:
    """What is wrong with the values of arguments that bind to `CHECKS[kind]`, or None."""
    relation = args.get("relation")
    if relation is not None and _RELATION_ALIASES.get(relation, relation) not in _RELATIONS:
        return f"relation must be one of {', '.join(_RELATIONS)}"
    if "n" in args and (not isinstance(args["n"], int) or isinstance(args["n"], bool) or args["n"] < 0):
        return "n must be an integer >= 0"
    if kind == "letter_case" and args.get("case") not in ("lower", "upper"):
        return "case must be 'lower' or 'upper'"
    if kind == "letter_frequency" and not (isinstance(args.get("letter"), str) and len(args["letter"]) == 1):
        return "letter must be one character"
    code = args.get("language")
    if code is not None and not (isinstance(code, str) and re.fullmatch(r"[A-Za-z]{2,3}(-\w+)?", code)):
        return f"language must be an ISO 639-1 code such as 'en', got {code!r}"
    words = args.get("keywords", [])
    words = (list(words) if isinstance(words, (list, tuple)) else [words]) + [args.get("keyword", "x")]
    if any(not isinstance(w, str) or not w.strip() for w in words):
        return "keywords must be non-empty strings"
    return None


def constraints_of(problem: Problem) -> Any:
    spec = problem.metadata.get("constraints")
    return spec if spec is not None else problem.reference


class ConstraintsVerifier:
    name = "constraints"

    def __init__(self, *, reward: str = "all"):
        if reward not in ("all", "fraction"):
            raise ValueError(f"reward must be 'all' or 'fraction', got {reward!r}")
        self.reward = reward

    def check_reference(self, problem: Problem) -> None:
        spec = constraints_of(problem)
        if not isinstance(spec, list) or not spec:
            raise ValueError(f"problem {problem.id}: constraints must be a non-empty list")
        for c in spec:
            why = validate(c)
            if why:
                raise ValueError(f"problem {problem.id}: {why}")

    def score_batch(self, responses: Sequence[str], problems: Sequence[Problem]) -> list[Score]:
        memo: dict[tuple[str, str], Score] = {}
        out = []
        for response, problem in zip(responses, problems):
            key = (response, json.dumps(constraints_of(problem), sort_keys=True, default=str)
                   + str(problem.metadata.get("constraint_reward", self.reward)))
            if key not in memo:
                memo[key] = self._score(response if isinstance(response, str) else str(response),
                                        problem)
            out.append(memo[key])
        return out

    def _score(self, response: str, problem: Problem) -> Score:
        spec = constraints_of(problem)
        if not isinstance(spec, list) or not spec or any(validate(c) for c in spec):
            return Score(0.0, False, ("bad_constraint",))
        results = []
        for c in spec:
            try:
                results.append(bool(CHECKS[c["type"]](response, **(c.get("args") or {}))))
            except Exception:  # a check must never crash the run; a crash is a failure
                results.append(False)
        failed = [c["type"] for c, ok in zip(spec, results) if not ok]
        mode = problem.metadata.get("constraint_reward", self.reward)
        reward = float(not failed) if mode == "all" else sum(results) / len(results)
        flags = ("constraints_failed",) if failed else ()
        return Score(reward, not failed, flags, details={"failed": failed, "results": results})
