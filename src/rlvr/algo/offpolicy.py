"""Importance-sampling correction for the gap between the sampler and the trainer.

Rollouts are drawn from a behaviour policy μ (the engine's weights, precision and kernels, maybe
several updates old) while the PPO ratio is taken against the trainer's π_old. The surrogate of a
token is multiplied by a detached weight w = π_old / μ so the update estimates the gradient under
π_old (the "decoupled" PPO objective: Hilton et al., arXiv:2110.00641; truncated IS for
sampler/trainer mismatch: Yao et al., "Your efficient RL framework secretly brings you off-policy
RL training", 2025; TRL's `vllm_importance_sampling_correction`, verl's rollout correction).

Variants, chosen by lookup at build time:
  level  "token":     w_t = π_old(y_t) / μ(y_t), one weight per token;
         "sequence":  w = Π_t π_old(y_t) / μ(y_t) over the sequence, given to every token of it
                      (unbiased for the sequence, but its spread grows with length: a per-token
                      log gap of 0.01 over 500 tokens is a factor of e^5);
  mode   "truncate":  min(w, cap)  (TIS; bias traded for bounded variance);
         "mask":      w where w <= cap, else 0  (the token or sequence drops out of the surrogate;
                      it still counts in the loss normaliser, as in TRL).
Weights never carry a gradient. Log-ratios are clamped to ±20 before exp(), as in `losses`.
When μ = π_old (the same log-probs) every weight is exactly 1 and the correction is the identity.

`mismatch_metrics` reports the gap whether or not a correction is applied: "mismatch/kl"
(the k3 estimate of KL(μ ‖ π_old) from tokens sampled by μ, as prime-rl's `mismatch_kl`),
"mismatch/ratio_min|mean|max" (token-level π_old / μ) and the share of tokens whose weight was
capped ("mismatch/truncated_frac" or "mismatch/masked_frac"). All over unmasked tokens.
Not guaranteed: anything about rows whose mask is all zero beyond "weight 1, no statistics".
Pure functions: [B, T] tensors in, tensors out; no devices, config objects or logging.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor

from rlvr.algo.kl import LOG_RATIO_CLAMP, kl_k3


def token_log_weight(old_logp: Tensor, behaviour_logp: Tensor, mask: Tensor) -> Tensor:
    """The log importance weight log π_old − log μ per token (not the policy ratio π / π_old of
    `variants.token_log_ratio`), 0 on padding: [B, T]."""
    diff = (old_logp.detach().float() - behaviour_logp.float()).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    return torch.where(mask.bool(), diff, torch.zeros_like(diff))


def sequence_log_weight(old_logp: Tensor, behaviour_logp: Tensor, mask: Tensor) -> Tensor:
    """Σ_t (log π_old − log μ) over each sequence, repeated on its tokens: [B, T]."""
    per_seq = token_log_weight(old_logp, behaviour_logp, mask).sum(-1, keepdim=True)
    return per_seq.clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP).expand_as(old_logp)


def truncate(log_w: Tensor, cap: float) -> tuple[Tensor, Tensor]:
    """(min(w, cap), w > cap) from log w: [B, T] each."""
    w = log_w.exp()
    return w.clamp(max=cap), w > cap


def mask_above(log_w: Tensor, cap: float) -> tuple[Tensor, Tensor]:
    """(w where w <= cap else 0, w > cap) from log w: [B, T] each."""
    w = log_w.exp()
    over = w > cap
    return torch.where(over, torch.zeros_like(w), w), over


IS_LEVELS: dict[str, Callable[[Tensor, Tensor, Tensor], Tensor]] = {
    "token": token_log_weight,
    "sequence": sequence_log_weight,
}
IS_MODES: dict[str, Callable[[Tensor, float], tuple[Tensor, Tensor]]] = {
    "truncate": truncate,
    "mask": mask_above,
}
CAPPED_METRIC = {"truncate": "mismatch/truncated_frac", "mask": "mismatch/masked_frac"}


def is_weights(old_logp: Tensor, behaviour_logp: Tensor, mask: Tensor, *,
               level: Callable = token_log_weight, mode: Callable = truncate,
               cap: float = 2.0) -> tuple[Tensor, Tensor]:
    """(detached weights [B, T] (1 on padding), capped [B, T] bool (False on padding))."""
    weights, capped = mode(level(old_logp, behaviour_logp, mask), cap)
    keep = mask.bool()
    return torch.where(keep, weights, torch.ones_like(weights)), capped & keep


def mismatch_metrics(old_logp: Tensor, behaviour_logp: Tensor, mask: Tensor,
                     capped: Tensor | None = None, capped_name: str = "mismatch/truncated_frac"
                     ) -> dict[str, Tensor]:
    """Gap between μ and π_old over unmasked tokens (see the module docstring); {} when no token."""
    keep = mask.bool()
    if not keep.any():
        return {}
    n = keep.sum()
    old, beh = old_logp.detach().float(), behaviour_logp.float()
    ratio = token_log_weight(old, beh, mask).exp()
    kl = kl_k3(beh, old)                       # samples come from μ: KL(μ ‖ π_old)
    out = {"mismatch/kl": torch.where(keep, kl, torch.zeros_like(kl)).sum() / n,
           "mismatch/ratio_min": ratio[keep].min(), "mismatch/ratio_mean": ratio[keep].mean(),
           "mismatch/ratio_max": ratio[keep].max()}
    if capped is not None:
        out[capped_name] = (capped & keep).sum().float() / n
    return out
