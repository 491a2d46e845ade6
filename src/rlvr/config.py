"""Typed, frozen run configuration: YAML presets plus dotted command-line overrides.

`load(path, overrides)` reads a YAML file (or a preset shipped in the package, by name, e.g.
`quickstart` for `rlvr/configs/quickstart.yaml`), applies `a.b=value` overrides, and builds frozen
dataclasses, checking every key and value against the field types (Literal choices, numeric
ranges) before anything runs. Errors name the key and the allowed values. Imports no torch.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from rlvr.errors import ConfigError

PRESETS = Path(__file__).resolve().parent / "configs"   # package data: found from a wheel install too


@dataclass(frozen=True)
class RunConfig:
    dir: str = "runs/default"
    save_every: int = 50            # steps between checkpoints (0: only at the end)
    keep_last: int = 2              # checkpoints kept besides the best
    best_metric: str = "eval/accuracy"
    eval_every: int = 25            # steps between held-out evaluations (0: only at the end)
    resume: str = "auto"            # auto | never | PATH to a checkpoint directory
    threads: int = 0                # torch intra-op threads (0: 1 on <= 2 cores, else cores // 2)
    progress: bool = True
    report: bool = True             # write report.html at the end
    transcripts_every: int = 10     # steps between sampled transcripts written to transcripts.jsonl
    max_bad_steps: int = 5          # stop after this many non-finite updates in a row
    device: str = "auto"            # auto (cuda when available) | cpu | cuda | cuda:N
    deterministic: bool = False     # GPU: deterministic algorithms + CUBLAS_WORKSPACE_CONFIG (slower)
    data_parallel: Literal["ddp", "fsdp2"] = "ddp"   # under torchrun (WORLD_SIZE > 1)


@dataclass(frozen=True)
class LoraConfig:
    r: int = 0                         # adapter rank; 0: train all weights (no PEFT)
    alpha: float = 16.0
    dropout: float = 0.0
    target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                       "down_proj")


@dataclass(frozen=True)
class ModelConfig:
    path: str = "builtin:tiny-llama"   # local HF checkpoint, hub id, or builtin:tiny-llama
    dtype: Literal["float32", "bfloat16"] = "float32"
    autocast_bf16: bool | None = None  # bf16 matrices, fp32 master weights (unset: on for GPU, off for CPU)
    gradient_checkpointing: bool = False  # recompute each layer in backward (less memory, ~30% slower)
    chat_template: bool = True         # apply the tokenizer's chat template to message prompts
    chat_template_text: bool = False   # also to plain-text prompts, as one user message (TRL: off)
    lora: LoraConfig = field(default_factory=LoraConfig)   # LoRA adapters through PEFT when r > 0


@dataclass(frozen=True)
class DataConfig:
    task: str = "arithmetic"           # arithmetic | agentic | reasoning_gym:NAME[=W],... | verifiers:MODULE:FN | "" to read `train_path`
    train_path: str = ""               # jsonl / parquet / dataset directory
    eval_path: str = ""
    verifier: str = ""                 # default verifier for rows that name none
    prompt_field: str = "prompt"       # column holding the prompt (MBPP: text, APPS: question)
    verifier_options: dict = field(default_factory=dict)  # {verifier name: {option: value}}
    heldout_size: int = 500
    difficulty: int = 3                # built-in tasks (arithmetic, agentic): number of digits
    ops: str = "+"                     # built-in task: operators to draw from, e.g. "+-"
    task_options: dict = field(default_factory=dict)  # {reasoning-gym task: {its config}} | verifiers: load_environment kwargs
    reward_funcs: tuple[dict, ...] = ()  # TRL reward functions / verifiers, weighted: the verifier `reward_funcs`


@dataclass(frozen=True)
class RolloutConfig:
    engine: Literal["hf", "vllm", "ray"] = "hf"   # only "hf" is built: the others exit 2 saying so
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0                     # 0: no top-k truncation
    max_staleness: int = 0             # k: step s trains on rollouts from weights >= s - k, generated ahead (0: synchronous)
    max_new_tokens: int = 48
    vllm_options: dict = field(default_factory=dict)   # engine vllm: extra keyword arguments to vllm.LLM
    workers: int = 2                    # engine ray: rollout actors in the placement group
    ray_address: str = ""               # engine ray: an existing cluster ("" starts a local one)


@dataclass(frozen=True)
class GRPOConfig:
    steps: int = 100
    group_size: int = 16
    prompts_per_step: int = 8
    lr: float = 5e-5
    lr_schedule: Literal["cosine", "constant", "linear"] = "cosine"
    min_lr_ratio: float = 0.1
    warmup_steps: int = 0
    weight_decay: float = 0.0
    adam_betas: tuple[float, float] = (0.9, 0.99)
    grad_clip: float = 1.0
    beta: float = 0.0                                   # KL coefficient; 0 loads no reference model
    kl_estimator: Literal["k1", "k2", "k3"] = "k3"
    advantage: Literal["group", "batch", "none", "rloo"] = "group"
    eps_low: float = 0.2
    eps_high: float = 0.2                               # > eps_low is DAPO's clip-higher
    dual_clip: float = 0.0                              # > 1 enables dual clip (c); 0 disables
    loss_agg: Literal["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"] = "token-mean"
    entropy_coef: float = 0.0
    mu: int = 1                                         # optimisation passes per batch
    minibatch_size: int = 0                             # sequences per minibatch (0: whole batch)
    skip_zero_advantage: bool = True                    # no backward for groups with zero advantage
    micro_batch_tokens: int = 0                         # max padded tokens per forward/backward (0: whole minibatch)
    is_correction: Literal["none", "token", "sequence"] = "none"  # importance weights π_old/μ (rollout vs trainer)
    is_mode: Literal["truncate", "mask"] = "truncate"   # weights above is_cap: cut to is_cap, or zeroed
    is_cap: float = 2.0                                 # C for is_mode


@dataclass(frozen=True)
class CurriculumConfig:
    enabled: bool = False
    low: float = 0.1                    # keep problems whose estimated pass rate is in [low, high]
    high: float = 0.9
    ema: float = 0.5                    # weight of the newest group's pass rate in the estimate
    window: int = 4                     # pass rates kept per problem for `recent_mean`
    recheck_every: int = 0              # steps before retired/deferred problems are re-checked (0: one epoch)
    pool_size: int = 2048               # built-in task: problems drawn once (by seed) into the pool
    init_path: str = ""                 # pass-rate file exported by an earlier run


@dataclass(frozen=True)
class DynamicSamplingConfig:
    enabled: bool = False
    max_rounds: int = 3                 # generation rounds per step before giving up refilling
    std_tol: float = 1e-6               # a group with reward std <= this counts as zero-variance
    oversample: float = 1.0             # a refill round draws ceil(missing groups x this) problems
    max_completions: int = 0            # per-step generation budget (0: prompts x G x max_rounds)


@dataclass(frozen=True)
class DoctorConfig:
    enabled: bool = True
    window: int = 10                    # K: steps a condition must hold / baseline length
    cooldown: int = 10                  # steps before the same alarm may fire again
    clipped_max: float = 0.5            # truncation: share of completions cut at max_new_tokens
    zero_std_max: float = 0.8           # frac_reward_zero_std above this for K steps
    flat_range: float = 0.02            # reward/mean moved less than this over K steps
    entropy_low: float = 0.2            # collapse: entropy < this x its baseline (first K steps)
    entropy_high: float = 3.0           # blow-up: entropy > this x its baseline
    kl_max: float = 1.0
    ratio_max: float = 10.0             # PPO or rollout importance ratio above this (or below 1/this)
    mismatch_kl_max: float = 0.01       # KL(behaviour ‖ trainer) per token above this
    length_growth: float = 2.0          # mean length > this x its baseline
    tamper_max: float = 0.05            # behaviour/tamper_rate (agent episodes) above this


@dataclass(frozen=True)
class AgentConfig:
    """Agent episodes (`data.task: agentic`): budgets and the workspace's test policy."""

    max_turns: int = 5                  # model turns per episode
    max_tokens: int = 80                # model + environment tokens per episode, after the prompt
    turn_tokens: int = 24               # new tokens per model turn
    tests_writable: bool = False        # True: writes to tests succeed (still flagged); the tamper control arm
    tamper_penalty: float = 0.0         # subtracted from the reward of an episode flagged tamper_attempt
    tool_timeout_s: float = 5.0         # per sandboxed tool call (run_tests, python, calc) and final score
    sandbox_workers: int = 1            # sandbox processes the episodes' tools share


@dataclass(frozen=True)
class EvalConfig:
    k: tuple[int, ...] = ()             # pass@k / maj@k during training (empty: greedy only)
    max_new_tokens: int = 0             # 0: same as rollout


@dataclass(frozen=True)
class Config:
    seed: int = 0
    run: RunConfig = field(default_factory=RunConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    grpo: GRPOConfig = field(default_factory=GRPOConfig)
    curriculum: CurriculumConfig = field(default_factory=CurriculumConfig)
    dynamic_sampling: DynamicSamplingConfig = field(default_factory=DynamicSamplingConfig)
    doctor: DoctorConfig = field(default_factory=DoctorConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)


# Value checks beyond the type: (predicate, description of the allowed values).
_RULES: dict[str, tuple[typing.Callable[[Any], bool], str]] = {
    "grpo.group_size": (lambda v: v >= 2, "an integer >= 2"),
    "grpo.prompts_per_step": (lambda v: v >= 1, "an integer >= 1"),
    "grpo.steps": (lambda v: v >= 0, "an integer >= 0"),
    "grpo.lr": (lambda v: v > 0, "a number > 0"),
    "grpo.min_lr_ratio": (lambda v: 0 <= v <= 1, "a number in [0, 1]"),
    "grpo.warmup_steps": (lambda v: v >= 0, "an integer >= 0"),
    "grpo.grad_clip": (lambda v: v >= 0, "a number >= 0 (0 disables clipping)"),
    "grpo.beta": (lambda v: v >= 0, "a number >= 0"),
    "grpo.eps_low": (lambda v: 0 < v < 1, "a number in (0, 1)"),
    "grpo.eps_high": (lambda v: v > 0, "a number > 0"),
    "grpo.dual_clip": (lambda v: v == 0 or v > 1, "0 (off) or a number > 1"),
    "grpo.mu": (lambda v: v >= 1, "an integer >= 1"),
    "grpo.minibatch_size": (lambda v: v >= 0, "an integer >= 0"),
    "grpo.entropy_coef": (lambda v: v >= 0, "a number >= 0"),
    "grpo.is_cap": (lambda v: v >= 1, "a number >= 1"),
    "model.lora.r": (lambda v: v >= 0, "an integer >= 0 (0: no LoRA)"),
    "model.lora.alpha": (lambda v: v > 0, "a number > 0"),
    "model.lora.dropout": (lambda v: 0 <= v < 1, "a number in [0, 1)"),
    "model.lora.target_modules": (lambda v: len(v) > 0, "a non-empty list of module names"),
    "rollout.temperature": (lambda v: v > 0, "a number > 0"),
    "rollout.top_p": (lambda v: 0 < v <= 1, "a number in (0, 1]"),
    "rollout.top_k": (lambda v: v >= 0, "an integer >= 0 (0: off)"),
    "rollout.max_staleness": (lambda v: v >= 0, "an integer >= 0 (0: synchronous)"),
    "rollout.max_new_tokens": (lambda v: v >= 1, "an integer >= 1"),
    "rollout.workers": (lambda v: v >= 1, "an integer >= 1"),
    "data.heldout_size": (lambda v: v >= 0, "an integer >= 0"),
    "data.prompt_field": (lambda v: bool(v), "a column name"),
    "data.difficulty": (lambda v: 1 <= v <= 12, "an integer in [1, 12]"),
    "data.ops": (lambda v: bool(v) and set(v) <= set("+-"), "a non-empty string of '+' and '-'"),
    "curriculum.low": (lambda v: 0 <= v < 1, "a number in [0, 1)"),
    "curriculum.high": (lambda v: 0 < v <= 1, "a number in (0, 1]"),
    "curriculum.ema": (lambda v: 0 < v <= 1, "a number in (0, 1]"),
    "curriculum.window": (lambda v: v >= 1, "an integer >= 1"),
    "curriculum.recheck_every": (lambda v: v >= 0, "an integer >= 0 (0: one epoch)"),
    "curriculum.pool_size": (lambda v: v >= 1, "an integer >= 1"),
    "dynamic_sampling.max_rounds": (lambda v: v >= 1, "an integer >= 1"),
    "dynamic_sampling.std_tol": (lambda v: v >= 0, "a number >= 0"),
    "dynamic_sampling.oversample": (lambda v: v >= 1, "a number >= 1"),
    "dynamic_sampling.max_completions": (lambda v: v >= 0, "an integer >= 0 (0: no extra cap)"),
    "doctor.window": (lambda v: v >= 2, "an integer >= 2"),
    "doctor.cooldown": (lambda v: v >= 0, "an integer >= 0"),
    "doctor.clipped_max": (lambda v: 0 < v <= 1, "a number in (0, 1]"),
    "doctor.zero_std_max": (lambda v: 0 < v <= 1, "a number in (0, 1]"),
    "doctor.flat_range": (lambda v: v >= 0, "a number >= 0"),
    "doctor.entropy_low": (lambda v: 0 <= v < 1, "a number in [0, 1)"),
    "doctor.entropy_high": (lambda v: v > 1, "a number > 1"),
    "doctor.kl_max": (lambda v: v > 0, "a number > 0"),
    "doctor.ratio_max": (lambda v: v > 1, "a number > 1"),
    "doctor.mismatch_kl_max": (lambda v: v > 0, "a number > 0"),
    "doctor.length_growth": (lambda v: v > 1, "a number > 1"),
    "doctor.tamper_max": (lambda v: 0 <= v <= 1, "a number in [0, 1]"),
    "agent.max_turns": (lambda v: v >= 1, "an integer >= 1"),
    "agent.max_tokens": (lambda v: v >= 1, "an integer >= 1"),
    "agent.turn_tokens": (lambda v: v >= 1, "an integer >= 1"),
    "agent.tamper_penalty": (lambda v: v >= 0, "a number >= 0"),
    "agent.tool_timeout_s": (lambda v: v > 0, "a number of seconds > 0"),
    "agent.sandbox_workers": (lambda v: v >= 1, "an integer >= 1"),
    "run.keep_last": (lambda v: v >= 1, "an integer >= 1"),
    "eval.k": (lambda v: all(k >= 1 for k in v), "a list of integers >= 1, e.g. [1, 4, 16]"),
    "eval.max_new_tokens": (lambda v: v >= 0, "an integer >= 0 (0: same as rollout)"),
    "run.threads": (lambda v: v >= 0, "an integer >= 0"),
    "run.max_bad_steps": (lambda v: v >= 1, "an integer >= 1"),
    "run.resume": (lambda v: bool(v), "auto, never, or a checkpoint path"),
    "run.device": (lambda v: bool(re.match(r"^(auto|cpu|cuda|cuda:\d+)$", v)), "auto, cpu, cuda or cuda:N"),
    "grpo.micro_batch_tokens": (lambda v: v >= 0, "an integer >= 0 (0: whole minibatch)"),
}


def _cross_checks(cfg: Config) -> None:
    if cfg.curriculum.low >= cfg.curriculum.high:
        raise ConfigError("curriculum.low must be < curriculum.high "
                          f"(got {cfg.curriculum.low} >= {cfg.curriculum.high})")
    try:
        from rlvr.verifiers.reward_funcs import check_terms
        check_terms(cfg.data.reward_funcs)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if cfg.agent.turn_tokens > cfg.agent.max_tokens:
        raise ConfigError(f"agent.turn_tokens ({cfg.agent.turn_tokens}) must be <= agent.max_tokens "
                          f"({cfg.agent.max_tokens}): a turn cannot be longer than its episode")
    if not cfg.data.task and not cfg.data.train_path:
        raise ConfigError("data.train_path: required when data.task is empty")


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    return getattr(tp, "__name__", str(tp))


def _coerce(key: str, value: Any, tp: Any) -> Any:
    """Check `value` against annotation `tp`; convert ints to floats and lists to tuples."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    bad = ConfigError(f"invalid value {value!r} for {key}; expected {_type_name(tp)}")
    if origin is Literal:
        if value not in args:
            raise ConfigError(f"invalid value {value!r} for {key}; allowed: "
                              + ", ".join(str(a) for a in args))
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _coerce(key, value, inner[0])
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise bad
        item_types = args if (len(args) != 2 or args[1] is not Ellipsis) else (args[0],) * len(value)
        if len(item_types) != len(value):
            raise bad
        return tuple(_coerce(f"{key}[{i}]", v, t) for i, (v, t) in enumerate(zip(value, item_types)))
    if tp is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"invalid value {value!r} for {key}; expected a mapping")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise bad
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad
        return value
    if tp is float:
        if isinstance(value, str):  # YAML 1.1 reads 1e-4 (no dot) as a string
            try:
                value = float(value)
            except ValueError:
                raise bad from None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise bad
        return value
    raise bad


def _build(cls: type, data: dict[str, Any], prefix: str = "") -> Any:
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        key = f"{prefix}{unknown[0]}"
        raise ConfigError(f"unknown config key {key!r}; allowed keys"
                          f"{' under ' + prefix.rstrip('.') if prefix else ''}: {', '.join(sorted(names))}")
    kwargs = {}
    for name, value in data.items():
        key, tp = f"{prefix}{name}", hints[name]
        if dataclasses.is_dataclass(tp):
            if not isinstance(value, dict):
                raise ConfigError(f"{key} must be a mapping of keys; got {value!r}")
            kwargs[name] = _build(tp, value, key + ".")
            continue
        value = _coerce(key, value, tp)
        rule = _RULES.get(key)
        if rule and not rule[0](value):
            raise ConfigError(f"invalid value {value!r} for {key}; expected {rule[1]}")
        kwargs[name] = value
    return cls(**kwargs)


def parse_override(text: str) -> tuple[list[str], Any]:
    """Parse `a.b.c=value`; the value is read as YAML (so 1e-4, true, [1, 2] work)."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"override {text!r} must look like section.key=value")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return key.strip().split("."), value


def from_dict(data: dict[str, Any], overrides: typing.Sequence[str] = ()) -> Config:
    data = _deep_copy(data)
    for text in overrides:
        path, value = parse_override(text)
        node = data
        for part in path[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"cannot set {'.'.join(path)}: {part} is not a section")
            node = child
        node[path[-1]] = value
    cfg = _build(Config, data)
    _cross_checks(cfg)
    return cfg


def load(path: str | Path | None, overrides: typing.Sequence[str] = ()) -> Config:
    """Load a YAML preset (or the defaults when `path` is None) and apply dotted overrides."""
    data: dict[str, Any] = {}
    if path is not None:
        p = _resolve(Path(path))
        try:
            data = yaml.safe_load(p.read_text()) or {}
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f"{p}:{mark.line + 1}" if mark else str(p)
            raise ConfigError(f"{where}: invalid YAML ({getattr(exc, 'problem', exc)})") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{p}: the top level must be a mapping of sections")
    return from_dict(data, overrides)


def _resolve(p: Path) -> Path:
    """A file path as given, or a bare name of a shipped preset."""
    if p.is_file():
        return p
    preset = PRESETS / f"{p.name}.yaml"
    if p.name == str(p) and not p.suffix and preset.is_file():
        return preset
    names = ", ".join(sorted(q.stem for q in PRESETS.glob("*.yaml")))
    raise ConfigError(f"config file not found: {p} (shipped presets: {names})")


def to_dict(cfg: Any) -> dict[str, Any]:
    """Plain, YAML-safe dict (tuples become lists)."""
    def plain(v: Any) -> Any:
        if isinstance(v, tuple):
            return [plain(x) for x in v]
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        return v
    return plain(dataclasses.asdict(cfg))


def dump(cfg: Config, path: str | Path) -> None:
    Path(path).write_text(yaml.safe_dump(to_dict(cfg), sort_keys=False))


def replace(cfg: Config, overrides: typing.Sequence[str]) -> Config:
    """A copy of `cfg` with dotted overrides applied (validated like `load`)."""
    return from_dict(to_dict(cfg), overrides)


def _deep_copy(d: Any) -> Any:
    if isinstance(d, dict):
        return {k: _deep_copy(v) for k, v in d.items()}
    if isinstance(d, list):
        return [_deep_copy(v) for v in d]
    return d

