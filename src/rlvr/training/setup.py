"""Builders that turn config sections into the objects a run needs (chosen once, by lookup).

Everything here validates before anything is written: unknown verifiers, bad data rows and
references that cannot be parsed raise `UserError` subclasses that name the file, line and field.
"""

from __future__ import annotations

import os
from itertools import chain
from typing import Any, Sequence

from rlvr.config import Config, check_launch
from rlvr.data import Mixture, check_references, eval_problems, named_verifiers, train_problems
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
        return {NAME: RewardFunctionsVerifier(terms=cfg.data.reward_funcs,
                                              workers=cfg.data.reward_workers)}
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(str(exc.args[0] if exc.args else exc)) from None


def build_problems(cfg: Config) -> tuple[dict[str, Any], Sequence[Problem], list[Problem], Any]:
    """(verifiers by name, training problems or [] for a task, held-out problems, task or None)."""
    if cfg.data.task:
        task = build_task(cfg)
        heldout = task.heldout(cfg.data.heldout_size)
        return task.verifiers(), task.train_problems(), heldout, task
    custom = build_reward_funcs(cfg)
    default = cfg.data.verifier or ("reward_funcs" if custom else "")
    train = train_problems(cfg.data, default)
    every = eval_problems(cfg.data, default)
    heldout = list(every[:cfg.data.heldout_size] if cfg.data.heldout_size else every)
    names = (named_verifiers(train) | named_verifiers(heldout)) - set(custom)
    unknown = sorted(names - set(verifier_names()))
    if unknown:
        bad = next(p for p in chain(train, heldout) if p.verifier == unknown[0])
        raise UserError(f"field 'verifier': unknown verifier {unknown[0]!r}; known: "
                        f"{', '.join(verifier_names() + sorted(custom))}", where=bad.metadata.get("source"))
    verifiers = {**build_verifiers(names, cfg.data.verifier_options), **custom}
    check_references(chain(train, heldout), verifiers)
    return verifiers, train, heldout, None


def check_engine(cfg: Config) -> None:
    """The chosen engine is known, its packages are importable, and the combination fits this
    launch (run once, when a run opens): the engine table's capabilities (`rlvr.rollout.engines`)
    read by the combination rules (`rlvr.config.checks.check_launch`), then the engine's own check."""
    from rlvr.rollout.engines import capabilities, engine_row, run_check
    from rlvr.training.distributed import world_from_env
    from rlvr.training.extras import check_extras

    engine_row(cfg.rollout.engine)   # an unknown name, before anything else
    check_extras(cfg)   # every optional package the config needs, engines and trackers included
    check_launch(cfg, world_from_env()[1], capabilities())
    run_check(cfg)


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
    """The rollout engine of `rollout.engine`'s row in the engine table (`rlvr.rollout.engines`);
    under torchrun (`dp`) wrapped as that row says, and under FSDP2 generating from `engine_model`,
    an unsharded copy synced on `load_weights`. The task wraps the engine (`Task.wrap_engine`:
    episodes for `data.task: agentic`); the engine must have every `RolloutEngine` member,
    `continue_ids` when the task plays episodes and `share` when rollouts run ahead."""
    from rlvr.rollout.base import check_engine_protocol
    from rlvr.rollout.engines import build

    engine = build(cfg, policy, tokenizer, device, dp, engine_model)
    if task is not None:
        check_engine_protocol(engine, continues=task.plays_episodes)
        engine = task.wrap_engine(engine, tokenizer)
    check_engine_protocol(engine, ahead=cfg.rollout.max_staleness > 0)
    return engine


def build_sampler(cfg: Config, task, problems: Sequence[Problem], seed: int | str | None = None):
    """Fresh task draws or dataset epochs; a pass-rate CurriculumSampler over a finite pool when the
    curriculum is on, or a plain pool sampler when only dynamic sampling (which refills) is on; for
    a `data.mix` mixture, one such sampler per source (seeded by its name), drawn by weight."""
    import random

    from rlvr.sampling.curriculum import CurriculumSampler
    from rlvr.sampling.mixture import MixtureSampler
    from rlvr.sampling.sampler import DatasetSampler, TaskSampler

    n, seed = cfg.grpo.prompts_per_step, cfg.seed if seed is None else seed
    if isinstance(problems, Mixture):
        return MixtureSampler({p.name: build_sampler(cfg, None, p.problems, f"{cfg.seed}/{p.name}")
                               for p in problems.parts}, {p.name: p.weight for p in problems.parts},
                              n, cfg.seed)
    if cfg.curriculum.enabled or cfg.dynamic_sampling.enabled:
        pool = problems or task.sample(random.Random(f"{seed}/pool"), cfg.curriculum.pool_size, "train")
        return CurriculumSampler(pool, n, seed, cfg.curriculum, band=cfg.curriculum.enabled)
    if task is not None and not problems:
        return TaskSampler(task, n, seed)
    return DatasetSampler(problems, n, seed)


def engine_memory_share(cfg: Config) -> float:
    """The share of the GPU an engine in the training process holds while the update runs (a
    colocated vLLM's `gpu_memory_utilization`), which the training budget leaves out; 0 for
    engines elsewhere and for the HF engine (its cache is freed before the update)."""
    from rlvr.rollout.engines import engine_row, resolve

    share = engine_row(cfg.rollout.engine).memory_share
    return 0.0 if share is None else float(resolve(share)(cfg))
