"""Every check that spans more than one config field, as pure functions of the config.

`check_config(cfg)` runs when a config loads: combinations that are wrong whatever runs them
(curriculum band, reward-function terms, agent budgets, a data source). `check_launch(cfg,
world_size, engines)` runs once when a run opens: combinations with no tested code path behind
them for that launch (engine, torchrun, LoRA, rollouts ahead, episode tasks), read from the engine
table's rows (`rlvr.rollout.engines`, a layer above: the caller passes the table, so no engine is
named here). Each raises `ConfigError` naming the key. Guaranteed: no check reads the environment,
the file system or an installed package; the caller passes what it needs (the world size, the
engine table), so each is a function of its arguments.
"""

from __future__ import annotations

import math
import re
from typing import Any, Mapping, Sequence

from rlvr.errors import ConfigError

# the keys of one `data.reward_funcs` term, and how its `fn` names a function (module:function)
TERM_KEYS = {"fn", "verifier", "service", "weight", "init", "options", "primary", "name", "timeout_s",
             "batch_size", "concurrency", "retries", "token_env"}   # the last four: service terms
_KINDS = ("fn", "verifier", "service")
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
    if cfg.grpo.reward_norm == "per_term" and cfg.grpo.advantage != "group":
        raise ConfigError(f"grpo.reward_norm=per_term whitens the summed terms over the batch itself "
                          f"(GDPO); it takes no grpo.advantage={cfg.grpo.advantage!r}: "
                          "set grpo.advantage=group")
    check_sampling(cfg)
    if cfg.grpo.policy_loss == "cispo" and cfg.grpo.dual_clip:
        raise ConfigError("grpo.dual_clip: not used by grpo.policy_loss=cispo (its weight is capped "
                          "at 1 + grpo.eps_high); set grpo.dual_clip=0")
    if cfg.distill.only and (not cfg.distill.enabled or cfg.distill.coef == 0):
        raise ConfigError("distill.only: pure distillation needs distill.teacher (or distill.vllm_url) and "
                          "distill.coef > 0 "
                          "(else the loss has no term left)")
    if cfg.distill.on_server and cfg.distill.enabled and cfg.rollout.temperature != 1.0:
        raise ConfigError(f"distill.vllm: a teacher on a vLLM server needs rollout.temperature=1 (it is "
                          f"{cfg.rollout.temperature}): the server returns temperature-1 log-probs of "
                          "given ids; keep the teacher in this process for another temperature")
    if cfg.distill.vllm_url and cfg.distill.teacher:
        raise ConfigError("distill.vllm_url: the teacher is the server there; give it or "
                          "distill.teacher, not both")
    if cfg.distill.vllm and not cfg.distill.teacher:
        raise ConfigError("distill.vllm: starts a server from distill.teacher, which is empty")


def check_data_source(data: Any) -> None:
    """Exactly one source of problems: a built-in task, or files. A task generates its own problems
    and would ignore `train_path`/`eval_path` (a run that looks fine on the wrong data), so both
    together are refused, naming what to drop; the default `task: arithmetic` counts as set."""
    check_mix(data)
    check_columns("data.columns", data.columns)
    if not data.task and not data.train_path and not data.mix:
        raise ConfigError("data.train_path: required when data.task is empty (or data.mix)")
    files = [k for k in ("train_path", "eval_path", "mix") if getattr(data, k)]
    if data.task and files:
        given = " and ".join(f"data.{k}={getattr(data, k)}" for k in files)
        given = given if files != ["mix"] else "data.mix"
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
    if sum(k in term for k in _KINDS) != 1:
        raise ValueError(f"{where}: give exactly one of 'fn' (a reward function), 'verifier' or "
                         "'service' (a reward server's URL)")
    if "service" in term and not (isinstance(term["service"], str)
                                  and re.match(r"^https?://[^/\s]+", term["service"])):
        raise ValueError(f"{where}.service: {term['service']!r} must be a URL like http://127.0.0.1:8410")
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
    for key, low, high in (("batch_size", 1, 1 << 20), ("concurrency", 1, 256), ("retries", 0, 10)):
        v = term.get(key, low)
        if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= high:
            raise ValueError(f"{where}.{key} must be an integer in [{low}, {high}]; got {v!r}")
    t = term.get("timeout_s", 30.0)
    if isinstance(t, bool) or not isinstance(t, (int, float)) or t <= 0:
        raise ValueError(f"{where}.timeout_s must be a number > 0; got {t!r}")


def check_launch(cfg: Any, world_size: int, engines: Mapping[str, Any]) -> None:
    """The engine fits a launch of `world_size` processes, and the combination has a tested path.
    `engines` is the engine table (`rlvr.rollout.engines.capabilities()`): name -> a row whose
    fields say what that engine can do (`ranks`, `ahead`, `lora`, `episodes`)."""
    engine = cfg.rollout.engine
    if not engines[engine].ranks and world_size > 1:
        able = " or ".join(n for n, row in engines.items() if row.ranks)
        raise ConfigError(f"rollout.engine={engine!r} under torchrun is not supported: its engine "
                          f"would run on every rank; use rollout.engine={able} with torchrun")
    check_combinations(cfg, engine, world_size > 1, engines)


def check_combinations(cfg: Any, engine: str, distributed: bool, engines: Mapping[str, Any]) -> None:
    """Combinations with no tested code path behind them stop before anything is written."""
    lora, ahead, row = cfg.model.lora.r > 0, cfg.rollout.max_staleness > 0, engines[engine]
    check_sampling(cfg, engines)
    if cfg.data.task == "agentic" or cfg.data.task.startswith("verifiers:"):
        kind = "agentic" if cfg.data.task == "agentic" else "verifiers"
        plays = [n for n, r in engines.items() if kind in r.episodes]
        key = ("rollout.engine" if engine not in plays else "rollout.max_staleness" if ahead
               else "torchrun" if distributed else "model.lora.r" if lora else None)
        if key is not None:
            shown = "agentic" if kind == "agentic" else "verifiers:..."
            raise ConfigError(f"{key}: data.task={shown} runs episodes only with rollout.engine="
                              f"{' or '.join(plays)}, max_staleness=0, one process and no LoRA, for now")
    if distributed and (lora or ahead):
        key = "model.lora.r" if lora else "rollout.max_staleness"
        raise ConfigError(f"{key}: not supported under torchrun yet (single process only)")
    if (lora and not row.lora) or (ahead and not row.ahead):
        key = "model.lora.r" if lora and not row.lora else "rollout.max_staleness"
        able = " or ".join(n for n, r in engines.items() if (r.lora if key == "model.lora.r" else r.ahead))
        raise ConfigError(f"{key}: needs rollout.engine={able} (the {engine} engine does not take "
                          "merged adapters or run ahead yet)")


MIX_KEYS = {"path", "weight", "name", "verifier", "config", "split", "columns", "reference_extractor",
            "prompt_field", "prompt_template", "system_prompt"}
COLUMN_KEYS = {"prompt", "reference", "id", "verifier"}
EXTRACTORS = ("", "gsm8k", "boxed", "none")
_MIX_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


def check_columns(key: str, columns: Any) -> None:
    """A column map names prompt / reference / id / verifier, each as a column name."""
    if not isinstance(columns, Mapping):
        raise ConfigError(f"{key}: expected a mapping like {{prompt: question, reference: answer}}")
    for k, v in columns.items():
        if k not in COLUMN_KEYS:
            raise ConfigError(f"{key}.{k}: unknown key; allowed: {', '.join(sorted(COLUMN_KEYS))}")
        if not isinstance(v, str) or not v:
            raise ConfigError(f"{key}.{k}: expected a column name, got {v!r}")


def mix_name(entry: Mapping[str, Any]) -> str:
    """A mixture source's name: its `name`, else its path's last part without the extension."""
    if entry.get("name"):
        return str(entry["name"])
    last = str(entry["path"]).rstrip("/").rsplit("/", 1)[-1]
    return last.split(".", 1)[0] or last


def check_mix(data: Any) -> None:
    """`data.mix`: a list of {path, weight > 0, ...} with unique names, replacing data.train_path."""
    if not data.mix:
        return
    if data.train_path:
        raise ConfigError("data.mix and data.train_path are both set: list every training source "
                          "in data.mix (data.eval_path stays the held-out set)")
    names: set[str] = set()
    for i, entry in enumerate(data.mix):
        key = f"data.mix[{i}]"
        if not isinstance(entry, Mapping) or not isinstance(entry.get("path"), str) or not entry["path"]:
            raise ConfigError(f"{key}: expected a mapping with a path, like {{path: train.jsonl, weight: 1}}")
        unknown = sorted(set(entry) - MIX_KEYS)
        if unknown:
            raise ConfigError(f"{key}.{unknown[0]}: unknown key; allowed: {', '.join(sorted(MIX_KEYS))}")
        w = entry.get("weight", 1.0)
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) or w <= 0:
            raise ConfigError(f"{key}.weight: expected a number > 0, got {w!r}")
        if entry.get("reference_extractor", "") not in EXTRACTORS:
            raise ConfigError(f"{key}.reference_extractor: expected one of gsm8k, boxed, none")
        check_columns(f"{key}.columns", entry.get("columns", {}))
        name = mix_name(entry)
        if not _MIX_NAME.match(name) or name in names:
            raise ConfigError(f"{key}.name: {name!r} must be unique and made of letters, digits, "
                              "'_', '-', '.' (it names the source's metrics: source/NAME/...)")
        names.add(name)


OWN_SAMPLING_KEYS = {"n", "seed", "temperature", "top_p", "top_k", "min_p", "max_tokens", "logprobs",
                     "stop", "include_stop_str_in_output", "repetition_penalty", "allowed_token_ids",
                     "prompt_logprobs"}


def check_sampling(cfg: Any, engines: Mapping[str, Any] | None = None) -> None:
    """Generation controls that keep the behaviour-policy contract, or a refusal naming why.

    Repetition penalty and extra vLLM keywords reshape each token's distribution by the row's
    history; the trainer's log π never sees that, so the update must weight tokens by π / μ with
    μ as sampled: only vLLM applies them (its processed log-probs include them), and only with
    `grpo.is_correction` on. min-p and stop strings keep the contract on every engine."""
    r = cfg.rollout
    own = sorted(set(r.generation_kwargs) & OWN_SAMPLING_KEYS)
    if own:
        raise ConfigError(f"rollout.generation_kwargs.{own[0]}: set by rlvr itself; use the rollout "
                          "key of that name")
    asked = [k for k, on in (("repetition_penalty", r.repetition_penalty != 1.0),
                             ("generation_kwargs", bool(r.generation_kwargs))) if on]
    if not asked or engines is None:   # which engines apply them: the engine table, when a run opens
        return
    able = [n for n, row in engines.items() if row.history_controls]
    if r.engine not in able:
        raise ConfigError(f"rollout.{asked[0]}: the {r.engine} engine does not apply it (it changes the "
                          f"sampling distribution; rollout.engine={' or '.join(able)} apply it and report "
                          "the log-probs it sampled from)")
    if cfg.grpo.is_correction == "none":
        raise ConfigError(f"rollout.{asked[0]}: it changes the distribution tokens are sampled from, "
                          "which the trainer's log-probs do not see; set grpo.is_correction=token (or "
                          "sequence) so the update weights tokens by pi/mu, or drop it")
