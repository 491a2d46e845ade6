"""Policy-loss variants: the importance-ratio level, the surrogate, and which tokens it trains.

Each is a pure function on right-padded [B, T] tensors with a [B, T] 0/1 mask (as in
`rlvr.algo.losses`), chosen once by name from a dict (`RATIO_LEVELS`, `POLICY_LOSSES`):
- ratio level: the per-token log ratio log π/π_old (PPO, GRPO) or the sequence's mean log ratio,
  the log of GSPO's geometric-mean sequence ratio, one value per sequence ([B, 1]);
- surrogate: PPO's clipped surrogate (gradient zero where the clip is active) or CISPO's
  (the clipped ratio is a detached weight on −A·log π, so every token keeps its gradient);
- `high_entropy_mask`: only the top share of tokens by entropy get the policy gradient;
- `mask_truncated`: completions cut at the generation budget get no loss at all.
Guaranteed: padding never reaches a ratio or a quantile; a surrogate's loss has logp's shape
[B, T] whatever the ratio level (a sequence's value is repeated over its tokens, so the
aggregation decides how sequences are weighted). Pure: no devices, config or logging.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor

from rlvr.algo.kl import LOG_RATIO_CLAMP


def token_log_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    """log ρ_t = log π(y_t) − log π_old(y_t), per token: [B, T]."""
    return logp - old_logp


def sequence_log_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    """GSPO (Zheng et al., arXiv:2507.18071): log s_i = (1/|y_i|) Σ_t log ρ_t, the log of
    the length-normalised sequence ratio s_i = (π(y_i)/π_old(y_i))^(1/|y_i|): [B, 1].

    Its gradient reaches every token of the sequence equally. The paper clips s_i
    with ε ≈ 3e-4 below and 4e-4 above (its §5.1): a sequence ratio moves far less than a token's,
    so the token-level default of 0.2 clips almost nothing. A row with no tokens has ratio 1.
    """
    diff = torch.where(mask.bool(), logp - old_logp, torch.zeros_like(logp))
    return diff.sum(-1, keepdim=True) / mask.sum(-1, keepdim=True).clamp(min=1)


RATIO_LEVELS: dict[str, Callable[[Tensor, Tensor, Tensor], Tensor]] = {
    "token": token_log_ratio,
    "sequence": sequence_log_ratio,
}


def _adv_like(adv: Tensor, like: Tensor) -> Tensor:
    # [B] → [B, 1]: a sequence-level advantage applies to every token. No dtype cast: an fp32
    # advantage times a bf16 ratio promotes to fp32 rather than rounding A.
    return (adv.unsqueeze(-1) if adv.dim() == 1 else adv).expand_as(like)


def ppo_surrogate(log_ratio: Tensor, logp: Tensor, adv: Tensor, eps_low: float, eps_high: float,
                  dual_clip: float = 0.0) -> tuple[Tensor, Tensor, Tensor]:
    """PPO's clipped surrogate (arXiv:1707.06347) on a given log ratio, as a loss to minimise:
    max(−A·ρ, −A·clip(ρ, 1−eps_low, 1+eps_high)), with dual clip c·|A| for A < 0 when c > 1.

    log_ratio: [B, T] or [B, 1] (`RATIO_LEVELS`); logp [B, T] fixes the output shape. Returns
    (loss, clipped_low, clipped_high), each [B, T]: clipped_low = ρ < 1−eps_low where A < 0,
    clipped_high = ρ > 1+eps_high where A > 0 (where the clip is active and the gradient is 0).
    """
    ratio = torch.exp(log_ratio.clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP))
    a = _adv_like(adv, ratio)
    loss = torch.maximum(-a * ratio, -a * ratio.clamp(1.0 - eps_low, 1.0 + eps_high))
    if dual_clip > 1.0:
        loss = torch.where(a < 0, torch.minimum(loss, -a * dual_clip), loss)
    low, high = (ratio < 1.0 - eps_low) & (a < 0), (ratio > 1.0 + eps_high) & (a > 0)
    return loss.expand_as(logp), low.expand_as(logp), high.expand_as(logp)


def cispo_surrogate(log_ratio: Tensor, logp: Tensor, adv: Tensor, eps_low: float, eps_high: float,
                    dual_clip: float = 0.0) -> tuple[Tensor, Tensor, Tensor]:
    """CISPO (MiniMax-M1, arXiv:2506.13585): loss = −sg(r̂)·A·log π, r̂ = min(ρ, 1+eps_high).

    The importance weight is clipped and detached instead of the update: a token whose ratio
    is past the cap still gets gradient (−r̂·A·∇log π), which PPO's clip would zero. As MiniMax-M1
    trains it there is no lower bound on r̂ (their ε_low^IS is "large"), so eps_low and dual_clip
    are not used. The cap is 1+eps_high; the paper and TRL's `loss_type="cispo"` (whose
    `epsilon_high` is the cap itself, i.e. rlvr's 1 + eps_high) use caps of a few units, e.g.
    eps_high = 4. Returns (loss [B, T], clipped_low (all False), clipped_high = ρ > cap where
    A > 0, as TRL's `cispo_clip_ratio` counts).
    """
    ratio = torch.exp(log_ratio.clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP))
    weight = ratio.clamp(max=1.0 + eps_high).detach().expand_as(logp)
    a = _adv_like(adv, logp)
    high = ((ratio > 1.0 + eps_high).expand_as(logp)) & (a > 0)
    return -weight * a * logp, torch.zeros_like(high), high


POLICY_LOSSES: dict[str, Callable[..., tuple[Tensor, Tensor, Tensor]]] = {
    "ppo": ppo_surrogate,
    "cispo": cispo_surrogate,
}


def high_entropy_mask(entropy: Tensor, mask: Tensor, quantile: float) -> Tensor:
    """The tokens in the top `quantile` share by entropy ([B, T] bool): entropy at or above the
    (1 − quantile) quantile of the masked tokens' entropies ("Beyond the 80/20 rule", Wang et al.,
    arXiv:2506.01939, trains the top 20%: quantile = 0.2). quantile = 1 keeps every token.
    Padding is never kept; with no tokens, nothing is.
    """
    keep = mask.bool()
    if quantile >= 1.0:
        return keep
    values = entropy.detach()[keep].float()
    if values.numel() == 0:
        return torch.zeros_like(keep)
    threshold = torch.quantile(values, 1.0 - quantile)
    return (entropy.detach().float() >= threshold) & keep


def mask_truncated(mask: Tensor, truncated: Tensor) -> Tensor:
    """The loss mask with the rows of truncated completions ([B] bool) zeroed: a completion cut
    at the generation budget has no final answer, so its reward says little about its tokens
    (DAPO, arXiv:2503.14476 §3.4, overlong filtering; TRL's `mask_truncated_completions`)."""
    return mask * (~truncated.bool()).unsqueeze(-1).to(mask.dtype)
