"""Builders that turn config sections into the objects a run needs (chosen once, by lookup).

Everything here validates before anything is written: unknown verifiers, bad data rows and
references that cannot be parsed raise `UserError` subclasses that name the file, line and field.
"""

from __future__ import annotations

import os
from typing import Any

from rlvr.config import Config, check_launch
from rlvr.data import check_references, load_problems
from rlvr.errors import ConfigError, UserError
from rlvr.tasks.base import build_task, build_verifiers
from rlvr.types import Problem
from rlvr.verifiers.base import verifier_names


def default_threads(cores: int | None = None) -> int:
    """1 thread on machines with up to 2 cores, else half the cores (at most 8).

    On 2 shared cores, 2 intra-op threads are only 1.3-1.5x faster than 1 when the machine is
    idle, but 5-50x slower when another process competes for a core (measured: a GRPO step of
    ~1 s took 36 s), so the safe choice there is one thread.
    """
    cores = cores or os.cpu_count() or 1
    return 1 if cores <= 2 else min(8, cores // 2)


def set_threads(threads: int) -> None:
    """torch intra-op threads: `threads`, or `default_threads()` when 0."""
    import torch

    torch.set_num_threads(threads or default_threads())


def build_reward_funcs(cfg: Config) -> dict[str, Any]:
    """The verifier `reward_funcs` from `data.reward_funcs` (nothing when that list is empty)."""
    if not cfg.data.reward_funcs:
        return {}
    from rlvr.verifiers.reward_funcs import NAME, RewardFunctionsVerifier

    try:
        return {NAME: RewardFunctionsVerifier(terms=cfg.data.reward_funcs)}
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(str(exc.args[0] if exc.args else exc)) from None


def build_problems(cfg: Config) -> tuple[dict[str, Any], list[Problem], list[Problem], Any]:
    """(verifiers by name, training problems or [] for a task, held-out problems, task or None)."""
    if cfg.data.task:
        task = build_task(cfg)
        heldout = task.heldout(cfg.data.heldout_size)
        return task.verifiers(), task.train_problems(), heldout, task
    custom = build_reward_funcs(cfg)
    default = cfg.data.verifier or ("reward_funcs" if custom else "")
    train = load_problems(cfg.data.train_path, default, cfg.data.prompt_field)
    heldout = (load_problems(cfg.data.eval_path, default, cfg.data.prompt_field)
               if cfg.data.eval_path else [])
    names = {p.verifier for p in train + heldout} - set(custom)
    unknown = sorted(names - set(verifier_names()))
    if unknown:
        bad = next(p for p in train + heldout if p.verifier == unknown[0])
        raise UserError(f"field 'verifier': unknown verifier {unknown[0]!r}; known: "
                        f"{', '.join(verifier_names() + sorted(custom))}", where=bad.metadata.get("source"))
    verifiers = {**build_verifiers(names, cfg.data.verifier_options), **custom}
    check_references(train + heldout, verifiers)
    return verifiers, train, heldout[:cfg.data.heldout_size] if cfg.data.heldout_size else heldout, None


def check_engine(cfg: Config) -> None:
    """The chosen engine's package is importable, and the combination fits this launch (run once,
    when a run opens; the combination rules are `rlvr.config.checks.check_launch`)."""
    from rlvr.training.distributed import world_from_env
    from rlvr.training.extras import check_extras

    check_extras(cfg)   # every optional package the config needs, engines and trackers included
    check_launch(cfg, world_from_env()[1])
    if cfg.rollout.engine == "vllm_server" and not cfg.rollout.vllm_urls:
        from rlvr.rollout.vllm_launch import server_python

        server_python(cfg.rollout.vllm_python)   # an interpreter with vLLM, or a ConfigError now
    if cfg.rollout.vllm_transport == "nccl":
        import torch

        if cfg.rollout.engine != "vllm_server" or not torch.cuda.is_available():
            raise ConfigError("rollout.vllm_transport=nccl: needs rollout.engine=vllm_server and CUDA on "
                              "the trainer (NCCL broadcasts GPU tensors; this machine has none: use shm)")


def build_device(cfg: Config, dp=None):
    """The run's one Device (`run.device`, `model.autocast_bf16`, `run.deterministic`); under
    torchrun `dp` (built first) hands it the rank's `local_rank`, so each rank gets its own GPU."""
    from rlvr.models.device import Device

    local_rank = dp.local_rank if dp is not None else None
    try:
        return Device.resolve(cfg.run.device, cfg.model.autocast_bf16, cfg.run.deterministic, local_rank,
                              cfg.model.bf16_where_native)
    except ValueError as exc:
        raise ConfigError(f"run.device: {exc}") from None


def build_data_parallel(cfg: Config):
    """A `DataParallel` under torchrun (WORLD_SIZE > 1), else None; build it before the Device."""
    from rlvr.training.distributed import DataParallel, world_from_env

    if world_from_env()[1] <= 1:
        return None
    # run.device: cpu on a GPU machine: gloo, or NCCL would bind each rank to a GPU
    return DataParallel(cfg.run.data_parallel, backend="gloo" if cfg.run.device == "cpu" else None)


def build_engine(cfg: Config, policy, tokenizer, device=None, dp=None, engine_model=None, task=None):
    """The rollout engine; under torchrun it samples each rank's share and gathers them, and
    under FSDP2 it generates from `engine_model`, an unsharded copy synced on `load_weights`.
    The task wraps the engine (`Task.wrap_engine`: episodes for `data.task: agentic`); the engine
    must have every `RolloutEngine` member, and `continue_ids` when the task plays episodes."""
    from rlvr.rollout.base import check_engine_protocol

    engine = _build_engine(cfg, policy, tokenizer, device, dp, engine_model)
    if task is not None:
        check_engine_protocol(engine, continues=task.plays_episodes)
        engine = task.wrap_engine(engine, tokenizer)
    check_engine_protocol(engine)
    return engine


def _build_engine(cfg: Config, policy, tokenizer, device=None, dp=None, engine_model=None):
    from rlvr.rollout.hf import HFEngine

    r, chat, text = cfg.rollout, cfg.model.chat_template, cfg.model.chat_template_text
    if r.engine == "vllm":
        from rlvr.rollout.vllm import VLLMEngine
        return VLLMEngine(policy, tokenizer, chat, r.vllm_options, template_text=text)
    if r.engine == "vllm_server":
        return _server_engine(cfg, policy, tokenizer, dp, engine_model)
    if r.engine == "ray":
        from rlvr.rollout.ray import RayEngine
        return RayEngine(policy, tokenizer, chat, r.workers, r.ray_address, template_text=text)

    def make(model):
        # the engine samples in the trainer's precision (device.bf16), or the ratio is not 1 on-policy
        return HFEngine(model, tokenizer, use_chat_template=chat, device=device, template_text=text)

    if dp is None:
        return make(policy)
    from rlvr.training.distributed import FullCopyEngine, ShardedEngine

    inner = FullCopyEngine(make, policy, dp, engine_model) if engine_model is not None else make(policy)
    return ShardedEngine(inner, dp)


def _server_engine(cfg: Config, policy, tokenizer, dp=None, engine_model=None):
    """vLLM servers; under torchrun rank 0 alone holds them (`RankZeroEngine`), fed from
    `engine_model` (FSDP2's unsharded copy) or the policy."""
    from rlvr.rollout.vllm_servers import VLLMServerEngine

    r, chat, text = cfg.rollout, cfg.model.chat_template, cfg.model.chat_template_text

    def make(model):
        return VLLMServerEngine(model, tokenizer, chat, r.vllm_servers, r.vllm_python, r.vllm_urls,
                                r.vllm_options, template_text=text, ray_address=r.ray_address,
                                transport=r.vllm_transport)

    if dp is None:
        return make(policy)
    from rlvr.rollout.base import PromptEncoder
    from rlvr.training.distributed import RankZeroEngine

    prompts = PromptEncoder.for_model(policy, tokenizer, chat, text)
    return RankZeroEngine(make, policy, dp, prompts, engine_model)


def build_sampler(cfg: Config, task, problems: list[Problem]):
    """Fresh task draws or dataset epochs; a pass-rate CurriculumSampler over a finite pool when the
    curriculum is on, or a plain pool sampler when only dynamic sampling (which refills) is on."""
    import random

    from rlvr.sampling.curriculum import CurriculumSampler
    from rlvr.sampling.sampler import DatasetSampler, TaskSampler

    n = cfg.grpo.prompts_per_step
    if cfg.curriculum.enabled or cfg.dynamic_sampling.enabled:
        pool = problems or task.sample(random.Random(f"{cfg.seed}/pool"), cfg.curriculum.pool_size, "train")
        return CurriculumSampler(pool, n, cfg.seed, cfg.curriculum, band=cfg.curriculum.enabled)
    if task is not None and not problems:
        return TaskSampler(task, n, cfg.seed)
    return DatasetSampler(problems, n, cfg.seed)


def behaviour_correction(g):
    """`offpolicy.is_weights` with grpo.is_correction / is_mode / is_cap bound (None when "none")."""
    import functools

    from rlvr.algo.offpolicy import IS_LEVELS, IS_MODES, is_weights

    if g.is_correction == "none":
        return None
    return functools.partial(is_weights, level=IS_LEVELS[g.is_correction], mode=IS_MODES[g.is_mode],
                             cap=g.is_cap)


def engine_memory_share(cfg: Config) -> float:
    """The share of the GPU an engine in the training process holds while the update runs (a
    colocated vLLM's `gpu_memory_utilization`), which the training budget leaves out; 0 for
    engines elsewhere and for the HF engine (its cache is freed before the update)."""
    if cfg.rollout.engine != "vllm":
        return 0.0
    from rlvr.rollout.vllm import memory_share
    return memory_share(cfg.rollout.vllm_options)
