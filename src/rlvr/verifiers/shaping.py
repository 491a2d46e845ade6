"""Reward shaping terms: DAPO's soft overlong penalty, a length budget, language consistency.

The pure functions take numbers (or text) and return a reward term; the small verifier classes
wrap them behind the `Verifier` protocol so that a `CompositeVerifier` can weight them next to a
task verifier. Shaping terms never set `correct` (it is always False: they are not answers).

Lengths are in TOKENS, as DAPO defines its penalty against the generation budget: the verifiers
take the sampled token ids (`takes_token_ids`; training and evaluation pass them through
`score_with_ids`, and composite verifiers hand them on to their terms), so a length is exactly the
count that `max_new_tokens` bounds. Only a caller that passes no ids gets `length_fn(text)`
(default: whitespace-separated words).
"""

from __future__ import annotations

import re
from typing import Callable, Optional, Sequence

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
    """A shaping term as a verifier: reward `term(response, problem, n_tokens)`, never `correct`;
    n_tokens is the completion's sampled token count, None when the caller passed no ids."""

    takes_token_ids = True

    def __init__(self, name: str, term: Callable[[str, Problem, Optional[int]], float]):
        self.name, self.term = name, term

    def check_reference(self, problem: Problem) -> None:
        return None

    def score_batch(self, responses: Sequence[str], problems: Sequence[Problem],
                    token_ids: Sequence[Sequence[int]] | None = None) -> list[Score]:
        out = []
        for i, (response, problem) in enumerate(zip(responses, problems)):
            text = response if isinstance(response, str) else str(response)
            n_tokens = len(token_ids[i]) if token_ids is not None else None
            out.append(Score(float(self.term(text, problem, n_tokens)), False))
        return out


def _length(length_fn: Callable[[str], int]) -> Callable[[str, Optional[int]], int]:
    return lambda text, n_tokens: n_tokens if n_tokens is not None else length_fn(text)


def overlong_verifier(*, max_length: int, cache_length: int,
                      length_fn: Callable[[str], int] = _word_count) -> ShapingVerifier:
    """DAPO's soft overlong penalty as a verifier (registry name "overlong"); max_length and
    cache_length are in tokens (e.g. max_length = rollout.max_new_tokens)."""
    length = _length(length_fn)
    return ShapingVerifier("overlong", lambda text, problem, n: soft_overlong_penalty(
        length(text, n), max_length, cache_length))


def length_budget_verifier(*, budget: int, slope: float = 1.0,
                           length_fn: Callable[[str], int] = _word_count) -> ShapingVerifier:
    """Length budget penalty in words (`length_fn`: a budget a user states about the answer's text,
    unlike `overlong`, which guards the generation budget in tokens); a problem may set its own
    `metadata["length_budget"]`."""
    return ShapingVerifier("length_budget", lambda text, problem, n: length_budget_penalty(
        length_fn(text), int(problem.metadata.get("length_budget", budget)), slope))


def language_consistency_verifier(*, language: str = "en") -> ShapingVerifier:
    """Language-consistency reward; a problem may set `metadata["language"]`."""
    return ShapingVerifier("language_consistency", lambda text, problem, n: language_consistency(
        text, str(problem.metadata.get("language", language))))
