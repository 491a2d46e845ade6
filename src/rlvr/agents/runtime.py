"""A built-in task played as agent episodes in a sandboxed `Workspace`: what `rlvr train` builds
for `data.task: agentic`.

`EpisodeTask` wraps a task whose problems carry workspace references (`rlvr.tasks.agentic`) with
the `agent` config section (a `rlvr.tasks.base.Task`, registered as `agentic`): it draws problems
like the task, gives the run the verifier (`episode_verifier`: the environment's score, kept on each
completion) and wraps the run's engine in an `EpisodeEngine`
whose environments are `Workspace`s over one sandbox pool, started on the first episode and
stopped by `close()` (called by the verifier and the engine when the run finishes).
Not guaranteed: that a tokenizer other than the tiny model built with the task's characters can
write the plain tool calls; `check_tokenizer` refuses one that cannot encode them.
"""

from __future__ import annotations

import random
from typing import Any

from rlvr.agents.calls import choose_format
from rlvr.agents.engine import EpisodeEngine, episode_verifier
from rlvr.agents.episode import Budget
from rlvr.agents.workspace import Workspace
from rlvr.errors import ConfigError
from rlvr.types import Problem

PROBE = "calc:write:answer=run:"    # the plain tool calls the built-in task's reasoner writes


class EpisodeTask:
    plays_episodes = True

    def __init__(self, task, agent_cfg, verifier: str = "workspace"):
        self.task, self.cfg, self.verifier_name = task, agent_cfg, verifier
        self.budget = Budget(agent_cfg.max_turns, agent_cfg.max_tokens, agent_cfg.turn_tokens)
        self._pool: Any = None    # a SandboxPool, started with the first episode

    def sample(self, rng: random.Random, n: int, split: str = "train") -> list[Problem]:
        return self.task.sample(rng, n, split)

    def heldout(self, n: int, seed: int = 1234) -> list[Problem]:
        return self.task.heldout(n, seed)

    def verifiers(self) -> dict:
        return {self.verifier_name: episode_verifier(self.verifier_name, self.close)}

    def train_problems(self) -> list[Problem]:
        return []

    def make_env(self, problem: Problem) -> Workspace:
        if self._pool is None:
            from rlvr.verifiers.sandbox import SandboxPool
            self._pool = SandboxPool(self.cfg.sandbox_workers, timeout_s=self.cfg.tool_timeout_s)
        return Workspace(self._pool, tests_writable=self.cfg.tests_writable,
                         tamper_penalty=self.cfg.tamper_penalty, timeout_s=self.cfg.tool_timeout_s)

    def wrap_engine(self, engine, tokenizer) -> EpisodeEngine:
        """The run's engine, playing episodes (needs `continue_ids`, i.e. the in-process engine)."""
        return EpisodeEngine(engine, tokenizer, self.make_env, self.budget,
                             self.check_tokenizer(tokenizer), on_close=self.close)

    def check_tokenizer(self, tokenizer):
        """The tool-call format this tokenizer writes; ConfigError when it is the plain format
        and the model cannot write this task's plain tool calls."""
        fmt = choose_format(tokenizer)
        if fmt.name == "plain":
            check_tokenizer(tokenizer)
        return fmt

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()


def from_config(cfg) -> EpisodeTask:
    """`data.task: agentic` (the `rlvr.tasks.base` registry's builder)."""
    from rlvr.tasks.agentic import AgenticTask

    return EpisodeTask(AgenticTask(cfg.data.difficulty), cfg.agent)


def check_tokenizer(tokenizer) -> None:
    ids = tokenizer(PROBE, add_special_tokens=False)["input_ids"]
    if tokenizer.decode(ids, skip_special_tokens=True) != PROBE:
        raise ConfigError("model.path: this tokenizer cannot write the agentic task's plain tool "
                          f"calls ({PROBE!r} does not survive encode/decode); start from the cold "
                          "start `rlvr sft --task agentic --out DIR` and set model.path=DIR")
