"""The glossary of what flows between stages: Problem → Group of Completions → scored Group.

Plain dataclasses, no torch: they cross process boundaries (verifier workers, Ray) as-is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Union

Messages = list[dict[str, str]]  # chat messages: [{"role": "user", "content": "..."}]


@dataclass(frozen=True)
class Score:
    """A verifier's verdict on one completion.

    reward: the scalar used for advantages. correct: whether the answer is right (for accuracy
    metrics; shaping terms change `reward`, never `correct`). flags: machine-readable reasons
    (`no_answer`, `multiple_answers`, `timeout`, `crash`, ...). extracted: the answer the verifier
    read, if any. details: free-form diagnostics (which constraints failed, per-term rewards, ...).
    """

    reward: float
    correct: bool
    flags: tuple[str, ...] = ()
    extracted: str | None = None
    details: dict[str, Any] | None = None


@dataclass(frozen=True)
class Problem:
    """One prompt with what is needed to verify answers to it.

    prompt: plain text or chat messages. reference: the reference answer (math, built-in tasks),
    a test spec (code) or None (constraints live in `metadata["constraints"]`). verifier: the name
    of the verifier that scores answers to this problem.
    """

    id: str
    prompt: Union[str, Messages]
    reference: Any = None
    verifier: str = "math"
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class Completion:
    """One sampled completion: tokens, their behaviour log-probs and why generation stopped.

    token_ids: exactly as sampled (never re-tokenised from `text`). logprobs: one per token, the
    behaviour log-prob defined in `rlvr.rollout.base` (log-prob of the sampled token under the
    distribution actually sampled from: after temperature, and after top-k / top-p truncation
    and renormalisation).
    """

    text: str
    token_ids: list[int]
    logprobs: list[float]
    finish_reason: str  # "stop" (EOS or stop string) or "length" (hit max_new_tokens); episodes: see agents
    score: Score | None = None
    # Agent episodes only (`rlvr.agents.episode`): token_ids interleave model and environment
    # tokens; loss_mask is 1 on model tokens (trained), 0 on environment tokens (never trained).
    loss_mask: list[int] | None = None
    turns: int = 1


@dataclass
class Group:
    """G completions of one problem, sampled from the same prompt tokens.

    policy_version: the number of optimizer updates (training steps) the sampling weights had seen.
    seed: the seed of the engine call that produced the group; the same call (same problems, n,
    sampling parameters and seed) on the same weights reproduces it.
    """

    problem: Problem
    prompt_ids: list[int]
    completions: list[Completion]
    policy_version: int = 0
    seed: int | None = None

    @property
    def rewards(self) -> list[float]:
        return [c.score.reward if c.score else 0.0 for c in self.completions]
