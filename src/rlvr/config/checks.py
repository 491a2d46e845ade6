"""Every check that spans more than one config field, as pure functions of the config.

`check_config(cfg)` runs when a config loads: combinations that are wrong whatever runs them
(curriculum band, reward-function terms, agent budgets, a data source). `check_launch(cfg,
world_size)` runs once when a run opens: combinations with no tested code path behind them for
that launch (engine, torchrun, LoRA, rollouts ahead, episode tasks). Each raises `ConfigError`
naming the key. Guaranteed: no check reads the environment, the file system or an installed
package; the caller passes what it needs (the world size), so each is a function of its arguments.
"""

from __future__ import annotations

import math
import re
from typing import Any, Mapping, Sequence

from rlvr.errors import ConfigError

# the keys of one `data.reward_funcs` term, and how its `fn` names a function (module:function)
TERM_KEYS = {"fn", "verifier", "weight", "init", "options", "primary", "name", "timeout_s"}
FN_SPEC = re.compile(r"^(?P<target>[^:]+):(?P<attr>[A-Za-z_][A-Za-z0-9_]*)$")


def check_config(cfg: Any) -> None:
    """The combinations `load` refuses, whatever launches the run."""
    if cfg.curriculum.low >= cfg.curriculum.high:
        raise ConfigError("curriculum.low must be < curriculum.high "
                          f"(got {cfg.curriculum.low} >= {cfg.curriculum.high})")
    try:
        check_terms(cfg.data.reward_funcs)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if cfg.agent.turn_tokens > cfg.agent.max_tokens:
        raise ConfigError(f"agent.turn_tokens ({cfg.agent.turn_tokens}) must be <= agent.max_tokens "
                          f"({cfg.agent.max_tokens}): a turn cannot be longer than its episode")
    check_data_source(cfg.data)
    if cfg.grpo.policy_loss == "cispo" and cfg.grpo.dual_clip:
        raise ConfigError("grpo.dual_clip: not used by grpo.policy_loss=cispo (its weight is capped "
                          "at 1 + grpo.eps_high); set grpo.dual_clip=0")
    if cfg.distill.only and (not cfg.distill.teacher or cfg.distill.coef == 0):
        raise ConfigError("distill.only: pure distillation needs distill.teacher and distill.coef > 0 "
                          "(else the loss has no term left)")


def check_data_source(data: Any) -> None:
    """Exactly one source of problems: a built-in task, or files. A task generates its own problems
    and would ignore `train_path`/`eval_path` (a run that looks fine on the wrong data), so both
    together are refused, naming what to drop; the default `task: arithmetic` counts as set."""
    if not data.task and not data.train_path:
        raise ConfigError("data.train_path: required when data.task is empty")
    files = [k for k in ("train_path", "eval_path") if getattr(data, k)]
    if data.task and files:
        given = " and ".join(f"data.{k}={getattr(data, k)}" for k in files)
        raise ConfigError(f"data.task={data.task!r} and {given} are both set, but a built-in task "
                          f"ignores files: to train on your file set data.task='' (YAML: task: \"\"), "
                          f"or drop data.{files[0]} to train on the task")


def check_terms(terms: Sequence[Any], key: str = "data.reward_funcs") -> None:
    """Raise ValueError naming `key[i].field` for the first malformed term."""
    for i, term in enumerate(terms):
        _check_term(f"{key}[{i}]", term)


def _check_term(where: str, term: Any) -> None:
    if not isinstance(term, Mapping):
        raise ValueError(f"{where} must be a mapping like {{fn: my_rewards.py:accuracy, "
                         f"weight: 1.0}} or {{verifier: math}}; got {term!r}")
    unknown = sorted(set(term) - TERM_KEYS)
    if unknown:
        raise ValueError(f"{where}.{unknown[0]}: unknown key; allowed: {', '.join(sorted(TERM_KEYS))}")
    if ("fn" in term) == ("verifier" in term):
        raise ValueError(f"{where}: give exactly one of 'fn' (a reward function) or 'verifier'")
    if "fn" in term and not (isinstance(term["fn"], str) and FN_SPEC.match(term["fn"])):
        raise ValueError(f"{where}.fn: {term['fn']!r} must look like module:function or "
                         "path/to/file.py:function")
    if "verifier" in term and not isinstance(term["verifier"], str):
        raise ValueError(f"{where}.verifier must be a verifier name")
    _check_term_values(where, term)


def _check_term_values(where: str, term: Mapping[str, Any]) -> None:
    weight = term.get("weight", 1.0)
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight):
        raise ValueError(f"{where}.weight must be a finite number; got {weight!r}")
    for opt in ("init", "options"):
        if opt in term and not isinstance(term[opt], Mapping):
            raise ValueError(f"{where}.{opt} must be a mapping of keyword arguments")
    t = term.get("timeout_s", 30.0)
    if isinstance(t, bool) or not isinstance(t, (int, float)) or t <= 0:
        raise ValueError(f"{where}.timeout_s must be a number > 0; got {t!r}")


def check_launch(cfg: Any, world_size: int) -> None:
    """The engine fits a launch of `world_size` processes, and the combination has a tested path."""
    engine = cfg.rollout.engine
    if engine not in ("hf", "vllm_server") and world_size > 1:
        raise ConfigError(f"rollout.engine={engine!r} under torchrun is not supported: its engine "
                          "would run on every rank; use rollout.engine=hf or vllm_server with torchrun")
    check_combinations(cfg, engine, world_size > 1)


def check_combinations(cfg: Any, engine: str, distributed: bool) -> None:
    """Combinations with no tested code path behind them stop before anything is written."""
    lora, ahead = cfg.model.lora.r > 0, cfg.rollout.max_staleness > 0
    if cfg.data.task == "agentic" or cfg.data.task.startswith("verifiers:"):
        # vllm_server continues episodes from token ids (`continue_ids`); tested on agentic only
        plays = ("hf", "vllm_server") if cfg.data.task == "agentic" else ("hf",)
        key = ("rollout.engine" if engine not in plays else "rollout.max_staleness" if ahead
               else "torchrun" if distributed else "model.lora.r" if lora else None)
        if key is not None:
            kind = "agentic" if cfg.data.task == "agentic" else "verifiers:..."
            raise ConfigError(f"{key}: data.task={kind} runs episodes only with rollout.engine="
                              f"{' or '.join(plays)}, max_staleness=0, one process and no LoRA, for now")
    if distributed and (lora or ahead):
        key = "model.lora.r" if lora else "rollout.max_staleness"
        raise ConfigError(f"{key}: not supported under torchrun yet (single process only)")
    if engine not in ("hf", "vllm_server") and (lora or ahead):   # servers take merged weights
        key = "model.lora.r" if lora else "rollout.max_staleness"
        raise ConfigError(f"{key}: needs rollout.engine=hf (the {engine} engine does not take "
                          "merged adapters or run ahead yet)")
