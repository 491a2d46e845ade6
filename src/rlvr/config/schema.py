"""The run configuration's schema: frozen dataclasses, each value rule declared beside its field.

A field's type says which values parse (Literal choices, int, float, tuples); `rule(...)` adds the
range a value must fall in, with the words an error shows. `rlvr.config.load` checks both for every
key before anything runs. Combinations of fields are checked in `rlvr.config.checks`, not here.
Guaranteed: importing this module imports nothing but the standard library.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

RULE = "rule"   # the metadata key that holds (predicate, description of the allowed values)


def rule(default: Any, check: Callable[[Any], bool], allowed: str) -> Any:
    """A field with `default` whose values must satisfy `check`; errors say "expected `allowed`"."""
    return field(default=default, metadata={RULE: (check, allowed)})


def at_least(low: float, allowed: str, default: Any) -> Any:
    return rule(default, lambda v: v >= low, allowed)


def above(low: float, allowed: str, default: Any) -> Any:
    return rule(default, lambda v: v > low, allowed)


def between(lo: float, hi: float, default: Any, *, lo_open: bool = False, hi_open: bool = False) -> Any:
    """A number in [lo, hi], with either end open when asked; the description says which."""
    def check(v: Any) -> bool:
        return (lo < v if lo_open else lo <= v) and (v < hi if hi_open else v <= hi)
    low, high = "(" if lo_open else "[", ")" if hi_open else "]"
    return rule(default, check, f"a number in {low}{lo:g}, {hi:g}{high}")


TRACKERS = ("tensorboard", "wandb", "mlflow", "trackio")
_DEVICE = re.compile(r"^(auto|cpu|cuda|cuda:\d+)$")


@dataclass(frozen=True)
class RunConfig:
    dir: str = "runs/default"
    save_every: int = 50            # steps between checkpoints (0: only at the end)
    keep_last: int = at_least(1, "an integer >= 1", 2)   # checkpoints kept besides the best
    best_metric: str = "eval/accuracy"
    eval_every: int = 25            # steps between held-out evaluations (0: only at the end)
    resume: str = rule("auto", bool, "auto, never, or a checkpoint path")   # auto | never | PATH
    # resume even when the config differs from the checkpoint's in keys that alter the run
    resume_allow_changes: bool = False
    # torch intra-op threads (0: 1 on <= 2 cores, else cores // 2)
    threads: int = at_least(0, "an integer >= 0", 0)
    progress: bool = True           # a progress bar when stdout is a terminal
    # steps between plain metrics lines when there is no bar (progress=false, or not a terminal)
    log_every: int = at_least(0, "an integer >= 0 (0: no plain lines)", 10)
    report: bool = True             # write report.html at the end
    transcripts_every: int = 10     # steps between sampled transcripts written to transcripts.jsonl
    # stop after this many non-finite updates in a row
    max_bad_steps: int = at_least(1, "an integer >= 1", 5)
    # stop at the first reward term that raises or times out (default: report it, score 0, go on)
    strict_rewards: bool = False
    # auto (cuda when available) | cpu | cuda | cuda:N
    device: str = rule("auto", lambda v: bool(_DEVICE.match(v)), "auto, cpu, cuda or cuda:N")
    deterministic: bool = False     # GPU: deterministic algorithms + CUBLAS_WORKSPACE_CONFIG (slower)
    data_parallel: Literal["ddp", "fsdp2"] = "ddp"   # under torchrun (WORLD_SIZE > 1)
    # experiment trackers fed every metrics line (wandb, mlflow and trackio are optional extras)
    trackers: tuple[str, ...] = rule(("tensorboard",), lambda v: set(v) <= set(TRACKERS),
                                     "a list of " + ", ".join(TRACKERS))
    # steps between steps whose every completion goes to completions.parquet (0: off)
    log_completions: int = at_least(0, "an integer >= 0 (0: off)", 0)


@dataclass(frozen=True)
class LoraConfig:
    r: int = at_least(0, "an integer >= 0 (0: no LoRA)", 0)   # adapter rank; 0: train all weights (no PEFT)
    alpha: float = above(0, "a number > 0", 16.0)
    dropout: float = between(0, 1, 0.0, hi_open=True)
    target_modules: tuple[str, ...] = rule(
        ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"),
        lambda v: len(v) > 0, "a non-empty list of module names")


@dataclass(frozen=True)
class ModelConfig:
    path: str = "builtin:tiny-llama"   # local HF checkpoint, hub id, or builtin:tiny-llama
    dtype: Literal["float32", "bfloat16"] = "float32"
    autocast_bf16: bool | None = None  # bf16 matrices, fp32 master weights (unset: on for GPU, off for CPU)
    # with autocast_bf16 unset: bf16 also on a CPU that computes it natively (AVX512-BF16 / AMX,
    # detected through oneDNN); an AVX2-only CPU emulates bf16, slower than fp32, and stays fp32
    bf16_where_native: bool = False
    gradient_checkpointing: bool = False  # recompute each layer in backward (less memory, ~30% slower)
    chat_template: bool = True         # apply the tokenizer's chat template to message prompts
    chat_template_text: bool = False   # also to plain-text prompts, as one user message (TRL: off)
    lora: LoraConfig = field(default_factory=LoraConfig)   # LoRA adapters through PEFT when r > 0


@dataclass(frozen=True)
class DataConfig:
    # arithmetic | agentic | reasoning_gym:NAME[=W],... | verifiers:MODULE:FN | "" to read `train_path`
    task: str = "arithmetic"
    # jsonl / json / parquet / a saved dataset or a folder in the hub's layout / a hub id (org/name)
    train_path: str = ""
    eval_path: str = ""
    config: str = ""                   # hub config of both paths (load_dataset name=), e.g. "main"
    split: str = rule("train", bool, "a split name")        # split of train_path
    eval_split: str = rule("test", bool, "a split name")    # split of eval_path
    # rows in another layout: {prompt: COL, reference: COL, id: COL, verifier: COL} (docs/data.md;
    # checked in config/checks.py: those keys only, each naming a column)
    columns: dict = field(default_factory=dict)
    reference_extractor: Literal["", "gsm8k", "boxed", "none"] = ""   # "": as the layout implies
    prompt_template: str = ""          # e.g. "{prompt} Put the final answer in \\boxed{}." ({COLUMN} too)
    system_prompt: str = ""            # a system message before each text prompt
    # several sources, drawn by weight each step: [{path, weight, name, verifier, config, split,
    # columns, reference_extractor, prompt_field, prompt_template, system_prompt}] (docs/data.md)
    mix: tuple[dict, ...] = ()
    verifier: str = ""                 # default verifier for rows that name none
    # column holding the prompt (MBPP: text, APPS: question)
    prompt_field: str = rule("prompt", bool, "a column name")
    verifier_options: dict = field(default_factory=dict)  # {verifier name: {option: value}}
    heldout_size: int = at_least(0, "an integer >= 0", 500)
    # built-in tasks: number of digits
    difficulty: int = rule(3, lambda v: 1 <= v <= 12, "an integer in [1, 12]")
    ops: str = rule("+", lambda v: bool(v) and set(v) <= set("+-"),
                    "a non-empty string of '+' and '-'")   # built-in task: operators to draw from, e.g. "+-"
    # {reasoning-gym task: {its config}} | verifiers: load_environment kwargs
    task_options: dict = field(default_factory=dict)
    # TRL reward functions / verifiers, weighted: the verifier `reward_funcs`
    reward_funcs: tuple[dict, ...] = ()
    # worker processes the reward functions run in; a step's calls are spread over them (each
    # function's batch cut into workers // functions calls), so a step costs about one timeout_s
    reward_workers: int = at_least(1, "an integer >= 1", 2)


@dataclass(frozen=True)
class RolloutConfig:
    # hf | vllm | ray | vllm_server (vLLM in server processes) | one added with rlvr.register_engine;
    # vllm and ray need their extras (pip install -e '.[vllm]'); the engine table (rlvr.rollout.engines)
    # knows the names and is checked when a run opens
    engine: str = rule("hf", lambda v: bool(v), "an engine name")
    temperature: float = above(0, "a number > 0", 1.0)
    top_p: float = between(0, 1, 1.0, lo_open=True)
    top_k: int = at_least(0, "an integer >= 0 (0: off)", 0)   # 0: no top-k truncation
    # k: step s trains on rollouts from weights >= s - k, generated ahead
    max_staleness: int = at_least(0, "an integer >= 0 (0: synchronous)", 0)
    max_new_tokens: int = at_least(1, "an integer >= 1", 48)
    min_p: float = between(0, 1, 0.0, hi_open=True)   # 0: off; a truncation like top_p (contract kept)
    # 1: off; vllm engines with grpo.is_correction only (it reshapes μ by history; see docs/data.md)
    repetition_penalty: float = above(0, "a number > 0", 1.0)
    stop: tuple[str, ...] = rule((), lambda v: all(v), "a list of non-empty strings")   # stop strings
    include_stop_str: bool = False     # keep the stop string in the completion's text
    # more vllm.SamplingParams keywords (vllm engines; with grpo.is_correction, as repetition_penalty)
    generation_kwargs: dict = field(default_factory=dict)
    vllm_options: dict = field(default_factory=dict)   # engine vllm: extra keyword arguments to vllm.LLM
    workers: int = at_least(1, "an integer >= 1", 2)   # engine ray: rollout actors in the placement group
    # engine ray: an existing cluster ("" starts a local one); engine vllm_server: "" local processes,
    # else the servers are placed by Ray on that cluster ("local": a Ray started here)
    ray_address: str = ""
    # engine vllm_server: servers to start; their interpreter ("": this one if it has vllm, else the
    # project's .venv-vllm); or running servers to use instead (host:port, key in RLVR_VLLM_AUTHKEY)
    vllm_servers: int = at_least(1, "an integer >= 1", 1)
    vllm_python: str = ""
    vllm_urls: tuple[str, ...] = ()
    # engine vllm_server: how weights reach the servers: shm (a file in /dev/shm, servers on this
    # host; tested on CPU) or nccl (broadcast from the trainer's GPU; CUDA only, unverified)
    vllm_transport: Literal["shm", "nccl"] = "shm"


@dataclass(frozen=True)
class GRPOConfig:
    steps: int = at_least(0, "an integer >= 0", 100)
    group_size: int = at_least(2, "an integer >= 2", 16)
    prompts_per_step: int = at_least(1, "an integer >= 1", 8)
    lr: float = above(0, "a number > 0", 5e-5)
    lr_schedule: Literal["cosine", "constant", "linear"] = "cosine"
    min_lr_ratio: float = between(0, 1, 0.1)
    warmup_steps: int = at_least(0, "an integer >= 0", 0)
    weight_decay: float = 0.0
    adam_betas: tuple[float, float] = (0.9, 0.99)
    grad_clip: float = at_least(0, "a number >= 0 (0 disables clipping)", 1.0)
    beta: float = at_least(0, "a number >= 0", 0.0)              # KL coefficient; 0 loads no reference model
    kl_estimator: Literal["k1", "k2", "k3"] = "k3"
    advantage: Literal["group", "batch", "none", "rloo"] = "group"
    # sum: the terms' weighted sum is normalised as one reward; per_term: GDPO, each term normalised
    # in its group, then the weighted sum whitened over the batch (TRL normalize_then_sum); needs
    # advantage=group
    reward_norm: Literal["sum", "per_term"] = "sum"
    eps_low: float = between(0, 1, 0.2, lo_open=True, hi_open=True)
    eps_high: float = above(0, "a number > 0", 0.2)             # > eps_low is DAPO's clip-higher
    dual_clip: float = rule(0.0, lambda v: v == 0 or v > 1, "0 (off) or a number > 1")   # c of dual clip
    loss_agg: Literal["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"] = "token-mean"
    entropy_coef: float = at_least(0, "a number >= 0", 0.0)
    mu: int = at_least(1, "an integer >= 1", 1)                 # optimisation passes per batch
    minibatch_size: int = at_least(0, "an integer >= 0", 0)     # sequences per minibatch (0: whole batch)
    skip_zero_advantage: bool = True                            # no backward for groups with zero advantage
    # max padded tokens per forward/backward; 0: the whole minibatch on a CPU, on a GPU a budget
    # from its memory and the model's size (training.gpu_forward.micro_batch_tokens)
    micro_batch_tokens: int = at_least(0, "an integer >= 0 (0: whole minibatch / GPU: from its memory)", 0)
    # importance weights π_old/μ (rollout vs trainer)
    is_correction: Literal["none", "token", "sequence"] = "none"
    is_mode: Literal["truncate", "mask"] = "truncate"   # weights above is_cap: cut to is_cap, or zeroed
    is_cap: float = at_least(1, "a number >= 1", 2.0)   # C for is_mode
    # importance ratio per token (PPO/GRPO) or per sequence (GSPO: use eps ~3e-4/4e-4, seq-mean agg)
    ratio_level: Literal["token", "sequence"] = "token"
    # surrogate: ppo (clipped) | cispo (clipped detached IS weight, cap 1 + eps_high; no eps_low)
    policy_loss: Literal["ppo", "cispo"] = "ppo"
    # share of tokens (highest entropy first) that get the policy gradient; 1: all
    top_entropy_quantile: float = between(0, 1, 1.0, lo_open=True)
    mask_truncated: bool = False        # completions cut at max_new_tokens get no loss (DAPO)


@dataclass(frozen=True)
class CurriculumConfig:
    enabled: bool = False
    # keep problems whose estimated pass rate is in [low, high]
    low: float = between(0, 1, 0.1, hi_open=True)
    high: float = between(0, 1, 0.9, lo_open=True)
    ema: float = between(0, 1, 0.5, lo_open=True)    # weight of the newest group's pass rate in the estimate
    window: int = at_least(1, "an integer >= 1", 4)   # pass rates kept per problem for `recent_mean`
    # steps before retired/deferred problems are re-checked
    recheck_every: int = at_least(0, "an integer >= 0 (0: one epoch)", 0)
    # built-in task: problems drawn once (by seed) into the pool
    pool_size: int = at_least(1, "an integer >= 1", 2048)
    init_path: str = ""                 # pass-rate file exported by an earlier run


@dataclass(frozen=True)
class DynamicSamplingConfig:
    enabled: bool = False
    # generation rounds per step before giving up refilling
    max_rounds: int = at_least(1, "an integer >= 1", 3)
    # a group with reward std <= this counts as zero-variance
    std_tol: float = at_least(0, "a number >= 0", 1e-6)
    # a refill round draws ceil(missing groups x this) problems
    oversample: float = at_least(1, "a number >= 1", 1.0)
    # per-step generation budget (0: prompts x G x max_rounds)
    max_completions: int = at_least(0, "an integer >= 0 (0: no extra cap)", 0)


@dataclass(frozen=True)
class DoctorConfig:
    enabled: bool = True
    window: int = at_least(2, "an integer >= 2", 10)        # K: steps a condition must hold / baseline length
    cooldown: int = at_least(0, "an integer >= 0", 10)      # steps before the same alarm may fire again
    # truncation: share of completions cut at max_new_tokens
    clipped_max: float = between(0, 1, 0.5, lo_open=True)
    zero_std_max: float = between(0, 1, 0.8, lo_open=True)  # frac_reward_zero_std above this for K steps
    flat_range: float = at_least(0, "a number >= 0", 0.02)  # reward/mean moved less than this over K steps
    # collapse: entropy < this x its baseline (first K steps)
    entropy_low: float = between(0, 1, 0.2, hi_open=True)
    entropy_high: float = above(1, "a number > 1", 3.0)     # blow-up: entropy > this x its baseline
    kl_max: float = above(0, "a number > 0", 1.0)
    # PPO or rollout importance ratio above this (or below 1/this)
    ratio_max: float = above(1, "a number > 1", 10.0)
    mismatch_kl_max: float = above(0, "a number > 0", 0.01)  # KL(behaviour ‖ trainer) per token above this
    length_growth: float = above(1, "a number > 1", 2.0)    # mean length > this x its baseline
    # behaviour/tamper_rate (agent episodes) above this
    tamper_max: float = between(0, 1, 0.05)
    # judge_rise: model-judged terms' reward rose by more than this over K steps, rule-based ones did not
    judge_rise: float = above(0, "a number > 0", 0.1)
    # distill/kl (nats per token) rose by more than this over K steps, rising in >= 80% of them
    distill_kl_rise: float = above(0, "a number > 0", 0.05)


@dataclass(frozen=True)
class AgentConfig:
    """Agent episodes (`data.task: agentic`): budgets and the workspace's test policy."""

    max_turns: int = at_least(1, "an integer >= 1", 5)      # model turns per episode
    # model + environment tokens per episode, after the prompt
    max_tokens: int = at_least(1, "an integer >= 1", 80)
    turn_tokens: int = at_least(1, "an integer >= 1", 24)   # new tokens per model turn
    # True: writes to tests succeed (still flagged); the tamper control arm
    tests_writable: bool = False
    # subtracted from the reward of an episode flagged tamper_attempt
    tamper_penalty: float = at_least(0, "a number >= 0", 0.0)
    # per sandboxed tool call (run_tests, python, calc) and final score
    tool_timeout_s: float = above(0, "a number of seconds > 0", 5.0)
    sandbox_workers: int = at_least(1, "an integer >= 1", 1)   # sandbox processes the episodes' tools share


@dataclass(frozen=True)
class EvalConfig:
    # pass@k / maj@k during training (empty: greedy only)
    k: tuple[int, ...] = rule((), lambda v: all(k >= 1 for k in v),
                              "a list of integers >= 1, e.g. [1, 4, 16]")
    max_new_tokens: int = at_least(0, "an integer >= 0 (0: same as rollout)", 0)   # 0: same as rollout


@dataclass(frozen=True)
class DistillConfig:
    """On-policy distillation (docs/distillation.md): the student samples, the teacher's per-token
    log-probs give each token an advantage −coef·(log π_student − log π_teacher)."""

    # teacher: a name as in model.path (builtin:..., a checkpoint folder); "" = no distillation.
    # Its tokenizer must equal the student's (same vocabulary and special ids), else exit 2.
    teacher: str = ""
    coef: float = at_least(0, "a number >= 0", 1.0)    # λ: weight of the reverse KL per token
    # pure distillation: the verifier's advantages leave the loss (needs distill.teacher)
    only: bool = False
    # the teacher's device: "" = the run's device, else cpu | cuda | cuda:N
    device: str = rule("", lambda v: v == "" or bool(_DEVICE.match(v)) and v != "auto",
                       "empty (the run's device), cpu, cuda or cuda:N")
    # the teacher in a vLLM server process rather than this one: vllm true starts one from
    # distill.teacher (interpreter: vllm_python, "" as rollout.vllm_python); vllm_url ("host:port", key in
    # RLVR_VLLM_AUTHKEY) uses a running one instead of distill.teacher. Either needs
    # rollout.temperature 1 (a server returns temperature-1 log-probs of given ids)
    vllm: bool = False
    vllm_url: str = ""
    vllm_python: str = ""
    vllm_options: dict = field(default_factory=dict)   # a started teacher server: keywords to vllm.LLM

    @property
    def enabled(self) -> bool:
        """A teacher is named: a checkpoint, or a running server."""
        return bool(self.teacher or self.vllm_url)

    @property
    def on_server(self) -> bool:
        """The teacher is a vLLM server process (started here, or at vllm_url)."""
        return self.vllm or bool(self.vllm_url)


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
    distill: DistillConfig = field(default_factory=DistillConfig)
