"""Training on episodes: a masked SFT cold start from reasoner episodes, and GRPO steps on sampled
episodes through the library's advantages, `build_batch` and `update_policy`.

`episode_tokens` encodes a reasoner episode exactly as `run_episodes` lays out a sampled one
(model turn + EOS, then the rendered observation), so the cold start and RL see the same token
layout. SFT loss: mean cross-entropy over model tokens only (observation tokens are context).
Not guaranteed: that these loops match `rlvr train` in features (no checkpoints, curriculum or
dynamic sampling); they exist for the built-in agentic task and experiments/tamper.py.
"""

from __future__ import annotations

import random
import time
from typing import Callable, Sequence

import torch
import torch.nn.functional as F

from rlvr.agents.calls import CallFormat, PlainFormat
from rlvr.agents.episode import Budget, episode_metrics, run_episodes
from rlvr.algo.advantages import group_advantages
from rlvr.models.policy import completion_logits, encode_prompt, left_pad, right_pad
from rlvr.rollout.base import SamplingParams
from rlvr.types import Problem


def episode_tokens(tokenizer, turns, fmt: CallFormat | None = None) -> tuple[list[int], list[int]]:
    """(ids, loss mask) of a reasoner episode [(turn text, observation | None), ...]."""
    fmt = fmt or PlainFormat()
    ids: list[int] = []
    mask: list[int] = []
    for text, obs in turns:
        turn = list(tokenizer(text, add_special_tokens=False)["input_ids"]) + [tokenizer.eos_token_id]
        ids += turn
        mask += [1] * len(turn)
        if obs is not None:
            o = list(tokenizer(fmt.render(obs), add_special_tokens=False)["input_ids"])
            ids += o
            mask += [0] * len(o)
    return ids, mask


def sft_episodes(model, tokenizer, batches: Callable[[int], Sequence[tuple[Problem, list]]],
                 steps: int, lr: float = 1e-3, log: Callable[[str], None] = print) -> list[float]:
    """`steps` AdamW steps of masked cross-entropy on `batches(step)` → [(problem, turns), ...]."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.98))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 20))
    model.train()
    losses = []
    for step in range(steps):
        rows = batches(step)
        prompts = [encode_prompt(tokenizer, p) for p, _ in rows]
        enc = [episode_tokens(tokenizer, turns) for _, turns in rows]
        p_ids, p_mask = left_pad(prompts, tokenizer.pad_token_id)
        c_ids, c_mask = right_pad([i for i, _ in enc], tokenizer.pad_token_id)
        loss_mask, _ = right_pad([m for _, m in enc], 0)
        logits = completion_logits(model, p_ids, p_mask, c_ids, c_mask).float()   # [B, T, V]
        ce = F.cross_entropy(logits.transpose(1, 2), c_ids, reduction="none")     # [B, T]
        loss = (ce * loss_mask).sum() / loss_mask.sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
        if step % 50 == 0 or step == steps - 1:
            log(f"  sft step {step}: loss {losses[-1]:.3f}")
    return losses


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
    from rlvr.training.update import build_batch, update_policy

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


def default_loss_spec(temperature: float = 1.0):
    from rlvr.algo.kl import KL_ESTIMATORS
    from rlvr.algo.losses import AGGREGATIONS
    from rlvr.training.update import LossSpec

    return LossSpec(kl_fn=KL_ESTIMATORS["k3"], agg_fn=AGGREGATIONS["token-mean"],
                    agg_counts_tokens=True, eps_low=0.2, eps_high=0.2, dual_clip=0.0, beta=0.0,
                    entropy_coef=0.0, temperature=temperature)


def reasoner_batches(task, batch_size: int, seed: int, tamper_share: float = 0.0):
    """batches(step) of reasoner episodes; a `tamper_share` of them take the tamper shortcut."""
    def batches(step: int):
        rng = random.Random(f"{seed}/sft/{step}")
        return [(p, task.episode(p, tamper=rng.random() < tamper_share))
                for p in task.sample(rng, batch_size)]
    return batches
