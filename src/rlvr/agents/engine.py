"""Agent episodes behind the `RolloutEngine` seam, scored by the environment itself.

`EpisodeEngine` wraps an engine that can continue token ids (`rollout.base.TokenContinuer`, e.g.
`HFEngine`) and answers `generate(problems, n, params, seed)` with `run_episodes`: each
`Completion` is a whole episode (model and environment tokens, `loss_mask` on model tokens,
behaviour log-probs on model tokens), stamped with the inner engine's policy version and the
call's seed. So `RolloutSource.generate`, dynamic sampling, greedy evaluation and the update see groups
exactly as from a one-turn engine. It passes the engine's prompt facts (`prompts`) on whole and
forwards the weights' members (`version`, `model`, `sync_metrics`, `load_weights`) to it.

The score comes from the environment (`Environment.score()`, computed when the episode ends, in
`run_episodes`) and stays on the completion: the problems' verifier is an `EngineScored`
(`episode_verifier`), which `score_groups` never calls, so the score flows unchanged through the
usual path (metrics per verifier, `behaviour/tamper_rate`, the doctor, curriculum pass rates). An
episode completion without a score is an error there, never a silent 0.
Not guaranteed: `max_new_tokens` of the sampling parameters is honoured (the episode budget
replaces it).
"""

from __future__ import annotations

from typing import Callable, Sequence

from rlvr.agents.calls import CallFormat
from rlvr.agents.env import EnvFactory
from rlvr.agents.episode import Budget, run_episodes
from rlvr.rollout.base import EngineScored, Inner, SamplingParams, stamp
from rlvr.types import Group, Problem


def workspace_reference(problem: Problem) -> None:
    """A `Workspace` problem's reference: a non-empty `tests` mapping (ValueError otherwise)."""
    ref = problem.reference
    if not isinstance(ref, dict) or not isinstance(ref.get("tests"), dict) or not ref["tests"]:
        raise ValueError(f"problem {problem.id}: reference must hold a non-empty 'tests' mapping")


def episode_verifier(name: str = "workspace", on_close: Callable[[], None] | None = None,
                     check_reference: Callable[[Problem], None] = workspace_reference) -> EngineScored:
    """The verifier of episode problems: the environment's own score of each episode, kept.
    `check_reference` is the environment's own rule (a workspace needs tests; a verifiers
    environment's rubric reads whatever its dataset holds, so it checks nothing)."""
    return EngineScored(name, check_reference, on_close)


class EpisodeEngine:
    """A `RolloutEngine` whose completions are multi-turn episodes (see the module docstring)."""

    version, model, sync_metrics = Inner(), Inner(), Inner()

    def __init__(self, inner, tokenizer, make_env: EnvFactory, budget: Budget,
                 fmt: CallFormat | None = None, on_close: Callable[[], None] | None = None):
        self.inner, self.tokenizer, self.make_env, self.budget = inner, tokenizer, make_env, budget
        self.fmt, self._on_close = fmt, on_close
        self.prompts = inner.prompts   # the inner engine's prompt facts, passed on whole

    def generate(self, problems: Sequence[Problem], n: int, params: SamplingParams,
                 seed: int) -> list[Group]:
        # episodes encode prompts with the engine's chat-template choice, never `template_text`
        groups = run_episodes(self.inner, self.tokenizer, problems, n, self.make_env, params, seed,
                              self.budget, self.fmt, self.inner.prompts.use_chat_template)
        stamp(groups, self.inner.version, seed)
        return groups

    def load_weights(self, policy, version: int = 0) -> None:
        self.inner.load_weights(policy, version)

    def close(self) -> None:
        self.inner.close()
        if self._on_close is not None:
            self._on_close()
