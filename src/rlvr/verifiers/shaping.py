"""Reward shaping terms: DAPO's soft overlong penalty, a length budget, language consistency.

The pure functions take numbers (or text) and return a reward term; the small verifier classes
wrap them behind the `Verifier` protocol so that a `CompositeVerifier` can weight them next to a
task verifier. Shaping terms never set `correct` (it is always False: they are not answers).

Lengths are counted by `length_fn` (default: whitespace-separated words). Pass a tokenizer-based
count (`length_fn=lambda s: len(tok(s).input_ids)`) to get DAPO's token lengths.
"""

from __future__ import annotations

import re
from typing import Callable, Sequence

from rlvr.types import Problem, Score
from rlvr.verifiers.language import language_share


def soft_overlong_penalty(length: int, max_length: int, cache_length: int) -> float:
    """DAPO (arXiv:2503.14476, eq. 13): 0 up to max−cache, then linear down to −1 at max, −1 beyond."""
    if cache_length <= 0:
        return 0.0 if length <= max_length else -1.0
    expected = max_length - cache_length
    if length <= expected:
        return 0.0
    if length <= max_length:
        return (expected - length) / cache_length
    return -1.0


def length_budget_penalty(length: int, budget: int, slope: float = 1.0) -> float:
    """−slope × (share of the budget overrun), floored at −1; 0 within budget."""
    if budget <= 0 or length <= budget:
        return 0.0
    return max(-1.0, -slope * (length - budget) / budget)


def reasoning_text(response: str) -> str:
    """The reasoning part of a response: the think block when there is one, else all of it."""
    m = re.search(r"<think>(.*?)(?:</think>|$)", response, re.DOTALL | re.IGNORECASE)
    if m:
        return m.group(1)
    close = response.lower().find("</think>")
    return response[:close] if close >= 0 else response


def language_consistency(response: str, language: str) -> float:
    """Share of the reasoning's letters written in `language`'s script (DeepSeek-R1's LC reward)."""
    return language_share(reasoning_text(response), language)


def _word_count(text: str) -> int:
    return len(text.split())


class ShapingVerifier:
    """A shaping term as a verifier: reward `term(response, problem)`, never `correct`."""

    def __init__(self, name: str, term: Callable[[str, Problem], float]):
        self.name, self.term = name, term

    def check_reference(self, problem: Problem) -> None:
        return None

    def score_batch(self, responses: Sequence[str], problems: Sequence[Problem]) -> list[Score]:
        out = []
        for response, problem in zip(responses, problems):
            text = response if isinstance(response, str) else str(response)
            out.append(Score(float(self.term(text, problem)), False))
        return out


def overlong_verifier(*, max_length: int, cache_length: int,
                      length_fn: Callable[[str], int] = _word_count) -> ShapingVerifier:
    """DAPO's soft overlong penalty as a verifier (registry name "overlong")."""
    return ShapingVerifier("overlong", lambda text, problem: soft_overlong_penalty(
        length_fn(text), max_length, cache_length))


def length_budget_verifier(*, budget: int, slope: float = 1.0,
                           length_fn: Callable[[str], int] = _word_count) -> ShapingVerifier:
    """Length budget penalty; a problem may set its own `metadata["length_budget"]`."""
    return ShapingVerifier("length_budget", lambda text, problem: length_budget_penalty(
        length_fn(text), int(problem.metadata.get("length_budget", budget)), slope))


def language_consistency_verifier(*, language: str = "en") -> ShapingVerifier:
    """Language-consistency reward; a problem may set `metadata["language"]`."""
    return ShapingVerifier("language_consistency", lambda text, problem: language_consistency(
        text, str(problem.metadata.get("language", language))))
