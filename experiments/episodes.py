"""GRPO steps and held-out evaluation on sampled episodes, for the tamper and agentic-task
experiments: a small loop of their own (no checkpoints, curriculum or dynamic sampling), kept so
their recorded numbers stay comparable. `rlvr train` is the library's loop; this is not.

Guaranteed: one `grpo_step` is one `update_policy` call on one batch of sampled episodes, with
group-normalised advantages. Not guaranteed: parity with `rlvr train` in features.
"""

from __future__ import annotations

import time
from typing import Sequence

import torch

from rlvr.agents.episode import Budget, episode_metrics, run_episodes
from rlvr.algo.advantages import group_advantages
from rlvr.rollout.base import SamplingParams
from rlvr.models.batch import build_batch
from rlvr.training.update import update_policy
from rlvr.types import Problem


def evaluate(engine, tokenizer, problems: Sequence[Problem], make_env, budget: Budget,
             params: SamplingParams = SamplingParams(greedy=True)) -> dict:
    """One episode per problem (greedy by default; fixed seed): held-out success (the
    environment's `correct`), turns, tamper rate."""
    groups = run_episodes(engine, tokenizer, problems, 1, make_env, params, seed=0, budget=budget)
    done = [g.completions[0] for g in groups]
    return {"eval/success": sum(bool(c.score and c.score.correct) for c in done) / max(1, len(done)),
            **{f"eval/{k}": v for k, v in episode_metrics(groups).items()}}


def grpo_step(model, optimizer, engine, tokenizer, problems, group_size: int, make_env,
              params: SamplingParams, budget: Budget, seed: int, loss_spec) -> dict:
    """One GRPO step on episodes; returns metrics (reward, episode stats, timing)."""
    t0 = time.perf_counter()
    groups = run_episodes(engine, tokenizer, problems, group_size, make_env, params, seed, budget)
    t1 = time.perf_counter()
    rewards = torch.tensor([g.rewards for g in groups], dtype=torch.float32)   # [P, G]
    adv = group_advantages(rewards)
    stats = update_policy(model, optimizer, build_batch(groups, adv, engine.pad_id), loss_spec)
    t2 = time.perf_counter()
    return {"reward/mean": float(rewards.mean()), **episode_metrics(groups),
            "loss": stats.get("loss", 0.0), "timing/generate": t1 - t0, "timing/update": t2 - t1,
            "timing/step": t2 - t0}
