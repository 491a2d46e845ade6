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
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from rlvr.algo.advantages import ADVANTAGES
from rlvr.algo.kl import KL_ESTIMATORS
from rlvr.algo.losses import AGGREGATIONS, seq_mean_token_sum_norm
from rlvr.algo.offpolicy import CAPPED_METRIC
from rlvr.algo.variants import POLICY_LOSSES, RATIO_LEVELS
from rlvr.config import Config
from rlvr.training import checkpoint, gpu_forward
from rlvr.training.schedule import lr_multiplier
from rlvr.training.seeds import seed_for
from rlvr.training.setup import behaviour_correction, engine_memory_share
from rlvr.training.update import Batch, Compute, LossSpec, update_policy
from rlvr.types import Group


@dataclass
class Models:
    policy: Any
    tokenizer: Any
    engine_model: Any          # what the rollout engine samples from
    reference: Any | None      # the frozen KL reference (None when grpo.beta is 0)


def load_models(cfg: Config, device, task=None) -> Models:
    """The models of a run on `device`; a task may reject the tokenizer before any file is written."""
    from rlvr.models.policy import load_policy, load_reference

    policy, tokenizer = load_policy(cfg.model.path, cfg.model.dtype, cfg.seed, device)
    if task is not None:
        task.check_tokenizer(tokenizer)
    if cfg.model.gradient_checkpointing and hasattr(policy, "gradient_checkpointing_enable"):
        policy.gradient_checkpointing_enable()   # HF forward; the fused path checkpoints itself
    if cfg.model.lora.r <= 0:
        return Models(policy, tokenizer, policy, load_reference(policy) if cfg.grpo.beta > 0 else None)
    from rlvr.models.lora import AdaptersDisabled, apply_lora

    engine_model = copy.deepcopy(policy)   # taken before the adapters go in
    policy = apply_lora(policy, cfg.model.lora, cfg.model.path, cfg.seed)
    return Models(policy, tokenizer, engine_model, AdaptersDisabled(policy) if cfg.grpo.beta > 0 else None)


def seed_all(seed: int) -> None:
    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed % 2**32)


def place_for_training(policy, dp) -> tuple[Any, Any | None]:
    """(the module the update runs, an unsharded copy for the engine under FSDP2 else None). The
    copy is taken first: FSDP2 shards the policy in place."""
    fsdp_copy = copy.deepcopy(policy) if dp is not None and dp.mode == "fsdp2" else None
    return (dp.wrap(policy) if dp is not None else policy), fsdp_copy


def loss_spec(cfg: Config) -> LossSpec:
    g = cfg.grpo
    agg_fn = AGGREGATIONS[g.loss_agg]
    if agg_fn is seq_mean_token_sum_norm:   # Dr. GRPO divides by the generation budget
        agg_fn = functools.partial(agg_fn, budget=generation_budget(cfg))
    return LossSpec(
        kl_fn=KL_ESTIMATORS[g.kl_estimator], agg_fn=agg_fn,
        agg_counts_tokens=g.loss_agg == "token-mean", eps_low=g.eps_low, eps_high=g.eps_high,
        dual_clip=g.dual_clip, beta=g.beta, entropy_coef=g.entropy_coef,
        temperature=cfg.rollout.temperature, is_weights=behaviour_correction(g),
        capped_metric=CAPPED_METRIC[g.is_mode], log_ratio_fn=RATIO_LEVELS[g.ratio_level],
        policy_fn=POLICY_LOSSES[g.policy_loss], top_entropy_quantile=g.top_entropy_quantile,
        mask_truncated=g.mask_truncated)


def generation_budget(cfg: Config) -> int:
    """The most tokens a completion may have: an episode's budget for agent tasks, else
    rollout.max_new_tokens."""
    return cfg.agent.max_tokens if cfg.data.task == "agentic" else cfg.rollout.max_new_tokens


class TrainingState:
    """Policy, train model, reference, optimizer and scheduler, and the update that changes them."""

    def __init__(self, cfg: Config, policy, train_model, reference, device, dp=None,
                 vocab_limit: int | None = None):
        g = cfg.grpo
        self.policy, self.train_model, self.reference = policy, train_model, reference
        self.device, self.dp, self.seed, self.grpo = device, dp, cfg.seed, g
        trainable = [p for p in train_model.parameters() if p.requires_grad]   # LoRA: the adapters
        self.optimizer = torch.optim.AdamW(trainable, lr=g.lr, betas=g.adam_betas,
                                           weight_decay=g.weight_decay)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lr_multiplier(g.lr_schedule, g.steps, g.warmup_steps, g.min_lr_ratio))
        self.advantage_fn = ADVANTAGES[g.advantage]
        self.loss_spec = loss_spec(cfg)
        ckpt = cfg.model.gradient_checkpointing
        tokens = gpu_forward.micro_batch_tokens(g.micro_batch_tokens, train_model, device, ckpt,
                                                engine_share=engine_memory_share(cfg))
        self.compute = Compute(device, ckpt, tokens, vocab_limit)

    def advantages(self, groups: Sequence[Group]) -> torch.Tensor:
        rewards = torch.tensor([g.rewards for g in groups], dtype=torch.float32)  # [P, G]
        return self.advantage_fn(rewards)

    def update(self, batch: Batch, step: int) -> dict[str, float]:
        """μ passes over the step's batch, then one scheduler step; returns the update's statistics."""
        g = self.grpo
        stats = update_policy(self.train_model, self.optimizer, batch, self.loss_spec, mu=g.mu,
                              minibatch_size=g.minibatch_size, grad_clip=g.grad_clip,
                              skip_zero_advantage=g.skip_zero_advantage, reference=self.reference,
                              autocast=self.device.bf16, compute=self.compute,
                              generator=self.device.host_generator(seed_for(self.seed, step, "mb")),
                              dp=self.dp)
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
