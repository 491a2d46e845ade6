"""The `RolloutEngine` protocol: G completions per problem with token ids, log-probs, finish reason.

Implementations: `hf.HFEngine` (in-process, shares the policy's weights; the CPU default). vLLM and
Ray engines plug in behind the same protocol as optional extras; the training loop never imports them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

from rlvr.types import Group, Problem


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 48
    greedy: bool = False


class RolloutEngine(Protocol):
    def generate(self, problems: Sequence[Problem], n: int, params: SamplingParams,
                 seed: int) -> list[Group]:
        """n completions for each problem; deterministic given `seed` and the weights."""
        ...

    def load_weights(self, policy) -> None:
        """Bring the engine's weights up to date with the policy (no-op when shared)."""
        ...


def stamp(groups: Sequence[Group], version: int, seed: int) -> None:
    """Provenance of the behaviour-policy contract for engines that do not set it themselves:
    the version of the sampling weights (the last `load_weights`) and the call's seed."""
    for g in groups:
        g.policy_version, g.seed = version, seed
