"""Instruction constraints (IFEval-style): checkable rules about the form of a response.

Constraints live in the data, as `problem.metadata["constraints"] = [{"type": ..., "args": {...}}]`
(or as `problem.reference` when that is such a list). Each type is a pure function
`(response, **args) -> bool` in `CHECKS`; `check_reference` validates types and arguments at load
time. The reward is 1 when all constraints hold (`reward="all"`, the default) or the fraction that
hold (`reward="fraction"`; per problem via `metadata["constraint_reward"]`); `details["failed"]`
lists the failed types.

Counting rules (documented because they decide rewards): words are `\\w+` runs (IFEval's tokenizer);
sentences end at `.`, `!` or `?` followed by space or the end; paragraphs are separated by blank lines
or `***`; bullets are lines starting with `*`, `-` or `•`; placeholders are `[name]`. Language is read
by `rlvr.verifiers.language` (langdetect when installed, else a script + stop-word reader); nothing
is downloaded at run time. Not guaranteed: IFEval's exact sentence splitter on abbreviations.
"""

from __future__ import annotations

import inspect
import json
import re
from typing import Any, Callable, Sequence

from rlvr.types import Problem, Score
from rlvr.verifiers.language import detect_language

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


def count_sentences(text: str) -> int:
    return len([s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if re.search(r"\w", s)])


def split_paragraphs(text: str) -> list[str]:
    return [p for p in re.split(r"\n\s*\n|\n?\s*\*\*\*\s*\n?", text.strip()) if p.strip()]


def word_count(response: str, relation: str, n: int) -> bool:
    return _compare(count_words(response), relation, n)


def sentence_count(response: str, relation: str, n: int) -> bool:
    return _compare(count_sentences(response), relation, n)


def paragraph_count(response: str, relation: str, n: int) -> bool:
    return _compare(len(split_paragraphs(response)), relation, n)


def json_format(response: str, required_keys: Sequence[str] = ()) -> bool:
    body = response.strip()
    fenced = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", body, re.DOTALL | re.IGNORECASE)
    if fenced:
        body = fenced.group(1)
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return False
    if required_keys:
        return isinstance(value, dict) and all(k in value for k in required_keys)
    return True


def _keyword_count(response: str, keyword: str) -> int:
    return len(re.findall(rf"(?<!\w){re.escape(keyword)}(?!\w)", response, re.IGNORECASE))


def keywords_include(response: str, keywords: Sequence[str]) -> bool:
    return all(_keyword_count(response, k) > 0 for k in keywords)


def keywords_exclude(response: str, keywords: Sequence[str]) -> bool:
    return all(_keyword_count(response, k) == 0 for k in keywords)


def keyword_frequency(response: str, keyword: str, relation: str, n: int) -> bool:
    return _compare(_keyword_count(response, keyword), relation, n)


def letter_frequency(response: str, letter: str, relation: str, n: int) -> bool:
    return _compare(response.lower().count(letter.lower()), relation, n)


def letter_case(response: str, case: str) -> bool:
    letters = [c for c in response if c.isalpha()]
    if case == "lower":
        return response == response.lower() and any(c.islower() for c in letters)
    if case == "upper":
        return response == response.upper() and any(c.isupper() for c in letters)
    raise ValueError(f"case must be 'lower' or 'upper', got {case!r}")


def starts_with(response: str, text: str) -> bool:
    return response.strip().lower().startswith(text.strip().lower())


def ends_with(response: str, text: str) -> bool:
    return response.strip().lower().endswith(text.strip().lower())


def bullet_count(response: str, relation: str, n: int) -> bool:
    bullets = re.findall(r"^\s*(?:[*•]|-(?!-))\s+\S", response, re.MULTILINE)
    return _compare(len(bullets), relation, n)


def section_count(response: str, relation: str, n: int, splitter: str = "Section") -> bool:
    sections = re.split(rf"\s?{re.escape(splitter)}\s?\d+\s?", response)
    return _compare(len(sections) - 1, relation, n)


def no_commas(response: str) -> bool:
    return "," not in response and "，" not in response


def placeholders(response: str, n: int) -> bool:
    return len(re.findall(r"\[[^\[\]\n]+\]", response)) >= n


def language(response: str, language: str) -> bool:
    return detect_language(response) == language.lower()


def title(response: str) -> bool:
    return re.search(r"<<[^\n<>]+>>", response) is not None


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
    relation = args.get("relation")
    if relation is not None and _RELATION_ALIASES.get(relation, relation) not in _RELATIONS:
        return f"constraint {kind!r}: relation must be one of {', '.join(_RELATIONS)}"
    if "n" in args and (not isinstance(args["n"], int) or isinstance(args["n"], bool) or args["n"] < 0):
        return f"constraint {kind!r}: n must be an integer >= 0"
    if kind == "letter_case" and args.get("case") not in ("lower", "upper"):
        return "constraint 'letter_case': case must be 'lower' or 'upper'"
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
