"""Builders that turn config sections into the objects a run needs (chosen once, by lookup).

Everything here validates before anything is written: unknown verifiers, bad data rows and
references that cannot be parsed raise `UserError` subclasses that name the file, line and field.
"""

from __future__ import annotations

import os
from typing import Any

from rlvr.config import Config
from rlvr.data import check_references, load_problems
from rlvr.errors import ConfigError, UserError
from rlvr.types import Problem
from rlvr.verifiers.base import get_verifier, verifier_names


def set_threads(threads: int) -> None:
    """torch intra-op threads: `threads`, or min(2, cores) — more oversubscribes small machines."""
    import torch

    n = threads or min(2, os.cpu_count() or 1)
    torch.set_num_threads(n)


def build_verifiers(names: set[str]) -> dict[str, Any]:
    verifiers = {}
    for name in sorted(names):
        if name not in verifier_names():
            raise ConfigError(f"unknown verifier {name!r}; known: {', '.join(verifier_names())}")
        verifiers[name] = get_verifier(name)
    return verifiers


def build_task(cfg: Config):
    from rlvr.tasks.arithmetic import ArithmeticTask

    tasks = {"arithmetic": lambda: ArithmeticTask(cfg.data.difficulty, cfg.data.ops)}
    if cfg.data.task not in tasks:
        raise ConfigError(f"invalid value {cfg.data.task!r} for data.task; allowed: "
                          f"{', '.join(tasks)}, or '' with data.train_path")
    return tasks[cfg.data.task]()


def build_problems(cfg: Config) -> tuple[dict[str, Any], list[Problem], list[Problem], Any]:
    """(verifiers by name, training problems or [] for a task, held-out problems, task or None)."""
    if cfg.data.task:
        task = build_task(cfg)
        heldout = task.heldout(cfg.data.heldout_size)
        return build_verifiers({"arithmetic"}), [], heldout, task
    train = load_problems(cfg.data.train_path, cfg.data.verifier)
    heldout = load_problems(cfg.data.eval_path, cfg.data.verifier) if cfg.data.eval_path else []
    names = {p.verifier for p in train + heldout}
    unknown = sorted(names - set(verifier_names()))
    if unknown:
        bad = next(p for p in train + heldout if p.verifier == unknown[0])
        raise UserError(f"field 'verifier': unknown verifier {unknown[0]!r}; known: "
                        f"{', '.join(verifier_names())}", where=bad.metadata.get("source"))
    verifiers = build_verifiers(names)
    check_references(train + heldout, verifiers)
    return verifiers, train, heldout[:cfg.data.heldout_size] if cfg.data.heldout_size else heldout, None


def build_engine(cfg: Config, policy, tokenizer):
    from rlvr.rollout.hf import HFEngine

    if cfg.rollout.engine != "hf":
        raise ConfigError(f"rollout.engine={cfg.rollout.engine!r} needs the optional extra "
                          f"`pip install rlvr[{cfg.rollout.engine}]` and a GPU; only 'hf' runs here")
    return HFEngine(policy, tokenizer, use_chat_template=cfg.model.chat_template)


def build_sampler(cfg: Config, task, problems: list[Problem]):
    from rlvr.sampler import DatasetSampler, TaskSampler

    n = cfg.grpo.prompts_per_step
    if task is not None:
        return TaskSampler(task, n, cfg.seed)
    return DatasetSampler(problems, n, cfg.seed)
