"""Agent episodes behind the `RolloutEngine` seam, scored by the environment through a verifier.

`EpisodeEngine` wraps an engine that can continue token ids (`HFEngine.continue_ids`) and answers
`generate(problems, n, params, seed)` with `run_episodes`: each `Completion` is a whole episode
(model and environment tokens, `loss_mask` on model tokens, behaviour log-probs on model tokens),
stamped with the inner engine's policy version and the call's seed. So `Run.generate`, dynamic
sampling, greedy evaluation and the update see groups exactly as from a one-turn engine.

The score comes from the environment (`Environment.score()`, computed when the episode ends, in
`run_episodes`). `EpisodeVerifier` hands it to `Run.verify` unchanged: the engine records each
episode's score in a `ScoreLedger` under (problem id, token ids), and the verifier takes it back
out for the same (problem, token ids). Scores therefore flow through the usual path (metrics per
verifier, `behaviour/tamper_rate`, the doctor, curriculum pass rates). Guaranteed: a completion
is given the score of an episode of the same problem with the same token ids (identical episodes
share a key; their scores are handed out in the order they were recorded). A response that no
episode produced (e.g. scored offline) gets reward 0 and the flag `no_episode`. Not guaranteed:
`max_new_tokens` of the sampling parameters is honoured (the episode budget replaces it).
"""

from __future__ import annotations

import threading
from collections import defaultdict, deque
from typing import Sequence

from rlvr.agents.calls import CallFormat
from rlvr.agents.env import EnvFactory
from rlvr.agents.episode import Budget, run_episodes
from rlvr.rollout.base import SamplingParams, stamp
from rlvr.types import Group, Problem, Score


class ScoreLedger:
    """Environment scores waiting for the verifier, keyed by (problem id, token ids)."""

    def __init__(self):
        self._scores: dict[tuple, deque] = defaultdict(deque)
        self._lock = threading.Lock()

    def record(self, groups: Sequence[Group]) -> None:
        with self._lock:
            for g in groups:
                for c in g.completions:
                    self._scores[(g.problem.id, tuple(c.token_ids))].append(c.score)

    def take(self, problem: Problem, token_ids: Sequence[int]) -> Score | None:
        key = (problem.id, tuple(token_ids))
        with self._lock:
            queue = self._scores.get(key)
            if not queue:
                return None
            score = queue.popleft()
            if not queue:
                del self._scores[key]
            return score

    def __len__(self) -> int:
        return sum(len(q) for q in self._scores.values())


def workspace_reference(problem: Problem) -> None:
    """A `Workspace` problem's reference: a non-empty `tests` mapping (ValueError otherwise)."""
    ref = problem.reference
    if not isinstance(ref, dict) or not isinstance(ref.get("tests"), dict) or not ref["tests"]:
        raise ValueError(f"problem {problem.id}: reference must hold a non-empty 'tests' mapping")


class EpisodeVerifier:
    """The verifier of episode problems: the environment's own score of each episode.
    `check_reference` is the environment's own rule (a workspace needs tests; a verifiers
    environment's rubric reads whatever its dataset holds, so it checks nothing)."""

    takes_token_ids = True

    def __init__(self, ledger: ScoreLedger, name: str = "workspace", on_close=None,
                 check_reference=workspace_reference):
        self.ledger, self.name, self._on_close = ledger, name, on_close
        self.check_reference = check_reference

    def score_batch(self, responses: Sequence[str], problems: Sequence[Problem],
                    token_ids: Sequence[Sequence[int]] | None = None) -> list[Score]:
        ids = token_ids if token_ids is not None else [()] * len(responses)
        out = []
        for problem, row in zip(problems, ids):
            score = self.ledger.take(problem, row)
            out.append(score if score is not None else Score(0.0, False, ("no_episode",)))
        return out

    def close(self) -> None:
        if self._on_close is not None:
            self._on_close()


class LedgerEngine:
    """What every engine that records its groups' scores in a ledger shares: it wraps the run's
    engine (weights, version, padding come from it) and closes it and its owner's resources."""

    def __init__(self, inner, ledger: ScoreLedger, on_close=None):
        self.inner, self.ledger, self._on_close = inner, ledger, on_close
        self.pad_id = inner.pad_id
        self.vocab_limit = getattr(inner, "vocab_limit", None)

    @property
    def model(self):
        return self.inner.model

    @property
    def version(self) -> int:
        return self.inner.version

    def load_weights(self, policy, version: int = 0) -> None:
        self.inner.load_weights(policy, version)

    def close(self) -> None:
        getattr(self.inner, "close", lambda: None)()
        if self._on_close is not None:
            self._on_close()


class EpisodeEngine(LedgerEngine):
    """A `RolloutEngine` whose completions are multi-turn episodes (see the module docstring)."""

    def __init__(self, inner, tokenizer, make_env: EnvFactory, budget: Budget, ledger: ScoreLedger,
                 fmt: CallFormat | None = None, on_close=None):
        super().__init__(inner, ledger, on_close)
        self.tokenizer, self.make_env, self.budget, self.fmt = tokenizer, make_env, budget, fmt

    def generate(self, problems: Sequence[Problem], n: int, params: SamplingParams,
                 seed: int) -> list[Group]:
        groups = run_episodes(self.inner, self.tokenizer, problems, n, self.make_env, params, seed,
                              self.budget, self.fmt, getattr(self.inner, "use_chat_template", True))
        stamp(groups, self.inner.version, seed)
        self.ledger.record(groups)
        return groups
