"""The training state: the policy and what updates it (optimizer, LR schedule, loss), saved whole.

`load_models` loads the policy, its tokenizer, the KL reference and the model the rollout engine
samples from (the policy itself, or a plain copy that receives merged weights under LoRA).
`place_for_training` wraps the policy for data parallelism. `TrainingState` builds AdamW, the LR
schedule, the advantage function and the loss from the `grpo` section, chosen once, and makes one
update per step (`update`).

`state_dict` holds the optimizer (gathered whole under FSDP2, a collective on every rank) and the
scheduler under the checkpoint's top-level keys "optimizer" and "scheduler"; the weights go into
the checkpoint as a Hugging Face model (`model_state`) and come back through `load_weights`, which
must run before `load_state_dict`. Not guaranteed: that a state saved under one data-parallel
mode loads under another.
"""

from __future__ import annotations

import copy
import functools
import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch

from rlvr.algo.advantages import ADVANTAGES, decoupled_advantages
from rlvr.algo.kl import KL_ESTIMATORS
from rlvr.algo.losses import AGGREGATIONS, LossSpec
from rlvr.algo.offpolicy import CAPPED_METRIC, IS_LEVELS, IS_MODES, is_weights
from rlvr.algo.variants import POLICY_LOSSES, RATIO_LEVELS
from rlvr.config import Config
from rlvr.models.device import seed_for
from rlvr.training import checkpoint, gpu_forward
from rlvr.training.schedule import lr_multiplier
from rlvr.models.batch import Batch
from rlvr.training.setup import engine_memory_share
from rlvr.training.update import Compute, UpdateSpec, update_policy
from rlvr.types import Group
from rlvr.verifiers.compose import reward_terms


@dataclass
class Models:
    policy: Any
    tokenizer: Any
    engine_model: Any          # what the rollout engine samples from
    reference: Any | None      # the frozen KL reference (None when grpo.beta is 0)
    teacher: Any | None = None  # the distillation teacher (`training.teacher`; None: no distill.teacher)


def load_models(cfg: Config, device, task=None) -> Models:
    """The models of a run on `device`; a task may reject the tokenizer before any file is written."""
    from rlvr.models.policy import load_policy, load_reference

    policy, tokenizer = load_policy(cfg.model.path, cfg.model.dtype, cfg.seed, device)
    if task is not None:
        task.check_tokenizer(tokenizer)
    from rlvr.training.teacher import load_teacher
    teacher = load_teacher(cfg, tokenizer, device)    # refused here when its vocabulary differs
    if cfg.model.gradient_checkpointing and hasattr(policy, "gradient_checkpointing_enable"):
        policy.gradient_checkpointing_enable()   # HF forward; the fused path checkpoints itself
    if cfg.model.lora.r <= 0:
        return Models(policy, tokenizer, policy, load_reference(policy) if cfg.grpo.beta > 0 else None,
                      teacher)
    from rlvr.models.lora import AdaptersDisabled, apply_lora

    engine_model = copy.deepcopy(policy)   # taken before the adapters go in
    policy = apply_lora(policy, cfg.model.lora, cfg.model.path, cfg.seed)
    return Models(policy, tokenizer, engine_model, AdaptersDisabled(policy) if cfg.grpo.beta > 0 else None,
                  teacher)


def seed_all(seed: int) -> None:
    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed % 2**32)


def place_for_training(policy, dp) -> tuple[Any, Any | None]:
    """(the module the update runs, an unsharded copy for the engine under FSDP2 else None). The
    copy is taken first: FSDP2 shards the policy in place."""
    fsdp_copy = copy.deepcopy(policy) if dp is not None and dp.mode == "fsdp2" else None
    return (dp.wrap(policy) if dp is not None else policy), fsdp_copy


def update_spec(cfg: Config) -> UpdateSpec:
    """The update and its loss from the `grpo` section, each variant looked up once by name."""
    g = cfg.grpo
    loss = LossSpec(eps_low=g.eps_low, eps_high=g.eps_high, dual_clip=g.dual_clip, beta=g.beta,
                    kl_fn=KL_ESTIMATORS[g.kl_estimator], agg_fn=AGGREGATIONS[g.loss_agg],
                    entropy_coef=g.entropy_coef, log_ratio_fn=RATIO_LEVELS[g.ratio_level],
                    policy_fn=POLICY_LOSSES[g.policy_loss], top_entropy_quantile=g.top_entropy_quantile,
                    distill_coef=cfg.distill.coef if cfg.distill.enabled else 0.0,
                    distill_only=cfg.distill.only)
    return UpdateSpec(loss=loss.with_budget(generation_budget(cfg)), temperature=cfg.rollout.temperature,
                      mu=g.mu, minibatch_size=g.minibatch_size, grad_clip=g.grad_clip,
                      skip_zero_advantage=g.skip_zero_advantage, is_weights=behaviour_correction(g),
                      capped_metric=CAPPED_METRIC[g.is_mode], mask_truncated=g.mask_truncated)


def behaviour_correction(g) -> Callable | None:
    """`offpolicy.is_weights` with grpo.is_correction / is_mode / is_cap bound (None when "none")."""
    if g.is_correction == "none":
        return None
    return functools.partial(is_weights, level=IS_LEVELS[g.is_correction], mode=IS_MODES[g.is_mode],
                             cap=g.is_cap)


def generation_budget(cfg: Config) -> int:
    """The most tokens a completion may have: an episode's budget for agent tasks, else
    rollout.max_new_tokens."""
    return cfg.agent.max_tokens if cfg.data.task == "agentic" else cfg.rollout.max_new_tokens


def summed_advantages(advantage_fn, groups: Sequence[Group]) -> torch.Tensor:
    """`advantage_fn` of each completion's reward (its terms' weighted sum)."""
    return advantage_fn(torch.tensor([g.rewards for g in groups], dtype=torch.float32))  # [P, G]


def per_term_advantages(groups: Sequence[Group]) -> torch.Tensor:
    """GDPO: `decoupled_advantages` of each completion's reward terms (`grpo.reward_norm: per_term`)."""
    terms, weights = reward_terms(groups)
    terms_P_G_K = torch.tensor([[[math.nan if r is None else r for r in c] for c in g] for g in terms],
                               dtype=torch.float32)
    return decoupled_advantages(terms_P_G_K, torch.tensor(weights, dtype=torch.float32))


class TrainingState:
    """Policy, train model, reference, optimizer and scheduler, and the update that changes them."""

    def __init__(self, cfg: Config, policy, train_model, reference, device, dp=None,
                 vocab_limit: int | None = None, teacher=None):
        g = cfg.grpo
        self.policy, self.train_model, self.reference = policy, train_model, reference
        self.teacher = teacher      # `training.teacher.Teacher` (distill.teacher) or None
        self.device, self.dp, self.seed = device, dp, cfg.seed
        trainable = [p for p in train_model.parameters() if p.requires_grad]   # LoRA: the adapters
        self.optimizer = torch.optim.AdamW(trainable, lr=g.lr, betas=g.adam_betas,
                                           weight_decay=g.weight_decay)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lr_multiplier(g.lr_schedule, g.steps, g.warmup_steps, g.min_lr_ratio))
        self.advantage_fn = (per_term_advantages if g.reward_norm == "per_term"
                             else functools.partial(summed_advantages, ADVANTAGES[g.advantage]))
        self.update_spec = update_spec(cfg)
        ckpt = cfg.model.gradient_checkpointing
        tokens = gpu_forward.micro_batch_tokens(g.micro_batch_tokens, train_model, device, ckpt,
                                                engine_share=engine_memory_share(cfg))
        self.compute = Compute(device, ckpt, tokens, vocab_limit)

    def advantages(self, groups: Sequence[Group]) -> torch.Tensor:
        return self.advantage_fn(groups)

    def update(self, batch: Batch, step: int) -> dict[str, float]:
        """μ passes over the step's batch, then one scheduler step; returns the update's statistics."""
        stats = update_policy(self.train_model, self.optimizer, batch, self.update_spec,
                              reference=self.reference, autocast=self.device.bf16, compute=self.compute,
                              generator=self.device.host_generator(seed_for(self.seed, step, "mb")),
                              dp=self.dp, teacher=self.teacher)
        self.scheduler.step()
        return stats

    def model_state(self) -> dict[str, torch.Tensor] | None:
        """The gathered state dict under FSDP2 (every rank must call this); None otherwise."""
        if self.dp is None or self.dp.mode != "fsdp2":
            return None
        return self.dp.full_model_state(self.train_model)

    def load_weights(self, ckpt: Path) -> None:
        if self.dp is not None and self.dp.mode == "fsdp2":
            self.dp.load_full_state(self.train_model, self.optimizer, checkpoint.read_weights(ckpt), None)
        else:
            checkpoint.load_weights(self.policy, ckpt)

    def state_dict(self) -> dict[str, Any]:
        optimizer = (self.dp.full_optim_state(self.train_model, self.optimizer) if self.dp
                     else self.optimizer.state_dict())
        return {"optimizer": optimizer, "scheduler": self.scheduler.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self.dp is not None and self.dp.mode == "fsdp2":
            self.dp.load_full_optim_state(self.train_model, self.optimizer, state["optimizer"])
        else:
            self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
