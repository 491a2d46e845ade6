"""A `verifiers` environment as an `rlvr train` task: what `data.task: verifiers:SPEC` builds.

SPEC names a function that returns a `vf.Environment` (classic API, verifiers 0.3.x), the way
reward functions are named: `my_module:load_environment` or `path/to/env.py:load_environment`
(resolved by `reward_funcs.resolve`); it is called with `data.task_options` as keyword arguments.

Problems: training draws come from the environment's dataset (`problems_from_env`); the held-out
set is the environment's eval dataset when it has one (first `data.heldout_size` rows), else a
split of the dataset seeded by the run's seed: min(heldout_size, rows // 5) rows held out and never
trained on (no held-out set, and so no eval, below 5 rows). Rollouts: the run's engine wrapped by
`VerifiersRollouts` (the environment's rollout loop against rlvr's engine over local HTTP);
rewards: the environment's rubric, kept on each rollout's completion (the verifier `verifiers` is
an `EngineScored`, which `score_groups` never re-scores; so `reward/verifiers/*`, and `rewards/<rubric
function>/mean` for each rubric function). The HTTP server is closed when the run finishes.

Everything the environment's loading can get wrong (module or file missing, function missing, the
call raising, a result that is not a `vf.Environment`, no dataset) is a ConfigError naming
data.task / data.task_options, raised before the run writes anything. A resumed run repeats an
uninterrupted one's samples (`rlvr.agents.vf`: the server's draws do not depend on the order
requests arrive in). Not guaranteed: the `agent` section's budgets (the environment's own
`max_turns` and `rollout.max_new_tokens` per model turn apply instead).
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any, Mapping

from rlvr.agents.engine import episode_verifier
from rlvr.errors import ConfigError
from rlvr.rollout.base import Inner
from rlvr.types import Problem

PREFIX = "verifiers:"
NAME = "verifiers"              # the verifier name: metrics are reward/verifiers/*


def load_environment(task: str, options: Mapping[str, Any]):
    """The environment `data.task: verifiers:SPEC` names, built with `options`; ConfigError else."""
    from rlvr.verifiers.reward_funcs import FN_SPEC, resolve

    spec = task[len(PREFIX):]
    if not FN_SPEC.match(spec):
        raise ConfigError(f"invalid value {task!r} for data.task; expected verifiers:module:function "
                          "or verifiers:path/to/env.py:function")
    vf = _import_vf()
    try:
        factory = resolve(spec)
    except Exception as exc:  # noqa: BLE001 - user code: any import failure is a config error
        raise ConfigError(f"data.task: cannot load {spec!r}: {type(exc).__name__}: {exc}") from None
    if not callable(factory):
        raise ConfigError(f"data.task: {spec!r} is not callable")
    try:
        env = factory(**dict(options or {}))
    except Exception as exc:  # noqa: BLE001
        raise ConfigError(f"data.task_options: {spec}(**{dict(options or {})!r}) raised "
                          f"{type(exc).__name__}: {exc}") from None
    if not isinstance(env, vf.Environment):
        raise ConfigError(f"data.task: {spec!r} returned {type(env).__name__}, not a "
                          "verifiers Environment (vf.SingleTurnEnv, vf.MultiTurnEnv, ...)")
    return env


def _import_vf():
    try:
        import verifiers as vf
    except ImportError:
        raise ConfigError("data.task: verifiers environments need the verifiers package "
                          "(from the rlvr checkout: pip install -e '.[verifiers]')") from None
    if not hasattr(vf, "SingleTurnEnv"):
        raise ConfigError("data.task: verifiers environments need verifiers' classic API "
                          "(verifiers>=0.3.1,<0.4); this verifiers has none")
    return vf


def split_problems(env, heldout_size: int, seed: int) -> tuple[list[Problem], list[Problem]]:
    """(training problems, held-out problems) as the module docstring says."""
    from rlvr.agents.vf import problems_from_env

    try:
        train = problems_from_env(env)
    except Exception as exc:  # noqa: BLE001 - e.g. "dataset is not set", a bad column
        raise ConfigError(f"data.task: the environment's dataset: {type(exc).__name__}: {exc}") from None
    if not train:
        raise ConfigError("data.task: the environment's dataset is empty")
    env.build_eval_dataset()
    if env.eval_dataset is not None:
        heldout = problems_from_env(env, eval_split=True)
        return train, [dataclasses.replace(p, id=f"vf/eval/{p.id[3:]}") for p in heldout][:heldout_size]
    order = list(range(len(train)))
    random.Random(f"{seed}/verifiers-heldout").shuffle(order)
    k = min(heldout_size, len(train) // 5)
    held = set(order[:k])
    return ([p for i, p in enumerate(train) if i not in held],
            [train[i] for i in sorted(held)])


class VerifiersTask:
    """Problems, verifier and engine wrapper for one verifiers environment (module docstring):
    a `rlvr.tasks.base.Task`, registered for `verifiers:SPEC`."""

    plays_episodes = True   # the environment's server continues token ids

    def __init__(self, task: str, options: Mapping[str, Any], seed: int, heldout_size: int,
                 max_new_tokens: int):
        self.env = load_environment(task, options)
        self.train, self._heldout = split_problems(self.env, heldout_size, seed)
        self.max_new_tokens = max_new_tokens
        self._rollouts: Any = None    # a VerifiersRollouts once an engine is wrapped

    def train_problems(self) -> list[Problem]:
        return list(self.train)

    def sample(self, rng: random.Random, n: int, split: str = "train") -> list[Problem]:
        return [rng.choice(self.train) for _ in range(n)]

    def heldout(self, n: int, seed: int = 1234) -> list[Problem]:
        return self._heldout[:n]

    def verifiers(self) -> dict:
        return {NAME: episode_verifier(NAME, self.close, check_reference=lambda p: None)}

    def wrap_engine(self, engine, tokenizer) -> "VerifiersEngine":
        from rlvr.agents.vf import VerifiersRollouts

        self._rollouts = VerifiersRollouts(self.env, engine, tokenizer, self.max_new_tokens)
        return VerifiersEngine(self._rollouts, engine, self.close)

    def check_tokenizer(self, tokenizer) -> None:
        return None

    def close(self) -> None:
        rollouts, self._rollouts = self._rollouts, None
        if rollouts is not None:
            rollouts.close()


class VerifiersEngine:
    """A `RolloutEngine` over `VerifiersRollouts`: the rollouts' groups, scored by the rubric;
    every other member is the engine the server samples with."""

    version, model, sync_metrics = Inner(), Inner(), Inner()

    def __init__(self, rollouts, inner, on_close):
        self.rollouts, self.inner, self._on_close = rollouts, inner, on_close
        self.prompts = inner.prompts   # the inner engine's prompt facts, passed on whole

    def generate(self, problems, n, params, seed):
        return self.rollouts.generate(problems, n, params, seed)

    def load_weights(self, policy, version: int = 0) -> None:
        self.inner.load_weights(policy, version)

    def close(self) -> None:
        self.inner.close()
        self._on_close()


def from_config(cfg) -> VerifiersTask:
    """`data.task: verifiers:SPEC` (the `rlvr.tasks.base` registry's builder)."""
    # the server's per-turn cap: each request asks for the rollout's or the eval's own cap
    cap = max(cfg.rollout.max_new_tokens, cfg.eval.max_new_tokens)
    return VerifiersTask(cfg.data.task, cfg.data.task_options, cfg.seed, cfg.data.heldout_size, cap)
