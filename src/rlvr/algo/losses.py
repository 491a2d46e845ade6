"""The GRPO policy loss: PPO-clipped surrogate, KL penalty, entropy bonus, loss aggregation.

Everything here is per token on right-padded [B, T] tensors with a [B, T] 0/1 or bool mask
(1 = completion token, 0 = padding; fractional weights are not supported); B is the number of
sequences (completions), T the padded length.
Guaranteed: padding never contributes to a loss or a statistic; with `norm` given, the sum of the
losses of minibatches equals the loss of the whole batch (so gradient accumulation is exact).
Not guaranteed: anything about rows whose mask is all zero beyond "they contribute 0".
Pure functions: no devices, config objects or logging; the loss's settings come once, as a
`LossSpec` (numbers and the variant functions, chosen at build time).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import Callable

import torch
from torch import Tensor

from rlvr.algo.kl import LOG_RATIO_CLAMP, kl_k3
from rlvr.algo.variants import high_entropy_mask, ppo_surrogate, token_log_ratio


def clipped_surrogate(logp: Tensor, old_logp: Tensor, adv: Tensor, eps_low: float,
                      eps_high: float, dual_clip: float = 0.0) -> tuple[Tensor, Tensor, Tensor]:
    """PPO clipped surrogate (Schulman et al., arXiv:1707.06347), as a loss to MINIMISE.

    loss = max(−A·ρ, −A·clip(ρ, 1−eps_low, 1+eps_high)), ρ = exp(logp − old_logp).
    Separate eps_low / eps_high is DAPO's clip-higher (Yu et al., arXiv:2503.14476); equal values
    are plain PPO/GRPO. dual_clip = c > 1 is dual-clip PPO (Ye et al., arXiv:1912.09729): for
    A < 0 the loss is additionally capped at c·|A|, so a huge ratio on a bad token cannot produce
    an unbounded update; dual_clip = 0 disables it. Deviation: log ρ is clamped to ±20 before
    exp() so a stale or corrupted old_logp cannot overflow.

    The masks follow TRL's `clip_ratio/low_mean` / `clip_ratio/high_mean` (and verl's equivalent
    split): clipped_low = ρ < 1−eps_low where A < 0; clipped_high = ρ > 1+eps_high where A > 0,
    i.e. exactly the tokens where the clip is active and the gradient is zero.

    logp, old_logp: [B, T]; adv: [B] or [B, T]. Returns (loss [B, T], clipped_low [B, T] bool,
    clipped_high [B, T] bool). Padding is not masked here.
    """
    return ppo_surrogate(token_log_ratio(logp, old_logp, logp), logp, adv, eps_low, eps_high, dual_clip)


def _masked(loss_B_T: Tensor, mask_B_T: Tensor) -> Tensor:
    # where() rather than a product: 0 · inf or 0 · nan on padding must not poison the sum.
    return torch.where(mask_B_T.bool(), loss_B_T, torch.zeros_like(loss_B_T))


def token_mean(loss_B_T: Tensor, mask_B_T: Tensor, norm: float | None = None) -> Tensor:
    """Σ over all completion tokens / number of tokens (DAPO, arXiv:2503.14476 Eq. 8).

    norm: the number of completion tokens in the WHOLE batch when this call sees one minibatch;
    None uses this call's own count (max(count, 1)).
    """
    denom = norm if norm is not None else mask_B_T.sum().clamp(min=1)
    return _masked(loss_B_T, mask_B_T).sum() / denom


def seq_mean_token_mean(loss_B_T: Tensor, mask_B_T: Tensor, norm: float | None = None) -> Tensor:
    """Mean over each sequence's tokens, then mean over sequences (GRPO, arXiv:2402.03300 Eq. 3).

    norm: the number of sequences in the WHOLE batch when this call sees one minibatch; None uses
    this call's B. A sequence with no tokens contributes 0 but still counts in B.
    """
    per_seq_B = _masked(loss_B_T, mask_B_T).sum(-1) / mask_B_T.sum(-1).clamp(min=1)
    denom = norm if norm is not None else loss_B_T.shape[0]
    return per_seq_B.sum() / denom


def seq_mean_token_sum_norm(loss_B_T: Tensor, mask_B_T: Tensor, norm: float | None = None,
                            budget: int | None = None) -> Tensor:
    """Each sequence's token SUM divided by a constant, then mean over sequences (Dr. GRPO,
    arXiv:2503.20783 Eq. 4; TRL's `loss_type="dr_grpo"`; verl's "seq-mean-token-sum-norm").

    The constant is `budget`, the generation budget (max_new_tokens) as Dr. GRPO and TRL divide
    by it; the run binds it (`LossSpec.with_budget`). budget None uses the mask's T (the
    padded length): equal only when the caller pads to the budget, and gradient accumulation is
    then exact only when every minibatch is padded to the same T. norm: the number of sequences
    in the WHOLE batch when this call sees one minibatch; None uses this call's B.
    """
    per_seq_B = _masked(loss_B_T, mask_B_T).sum(-1) / (budget or loss_B_T.shape[-1])
    denom = norm if norm is not None else loss_B_T.shape[0]
    return per_seq_B.sum() / denom


AGGREGATIONS: dict[str, Callable[..., Tensor]] = {
    "token-mean": token_mean,
    "seq-mean-token-mean": seq_mean_token_mean,
    "seq-mean-token-sum-norm": seq_mean_token_sum_norm,
}


def token_entropy(logits: Tensor) -> Tensor:
    """Entropy of the next-token distribution at each position: [B, T, V] → [B, T].

    Computed from log_softmax (a logsumexp, so no overflow for large logits); vocabulary entries
    with −inf logits (masked out) contribute 0 instead of 0·(−inf) = nan. Memory is O(B·T·V):
    chunk over T for large vocabularies.
    """
    # half-precision logits are upcast: their entropy sums V terms and loses digits otherwise
    logp = torch.log_softmax(logits if logits.dtype == torch.float64 else logits.float(), dim=-1)
    p = logp.exp()
    return -(p * logp.masked_fill(p == 0, 0.0)).sum(-1)


def _as_stat(x: Tensor) -> Tensor:
    # statistics are reported in float32 (or float64) whatever the training dtype
    return x.detach() if x.dtype == torch.float64 else x.detach().float()


def _masked_mean(x_B_T: Tensor, mask_B_T: Tensor) -> Tensor:
    x_B_T = _as_stat(x_B_T)
    return _masked(x_B_T, mask_B_T).sum() / mask_B_T.sum().clamp(min=1)


def _ratio_stats(logp: Tensor, old_logp: Tensor, mask_B_T: Tensor) -> dict[str, Tensor]:
    ratio = torch.exp(_as_stat(logp - old_logp).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP))
    keep = mask_B_T.bool()
    if not keep.any():
        nan = _as_stat(logp.new_tensor(float("nan")))
        return {"ratio/mean": nan, "ratio/max": nan, "ratio/min": nan}
    return {"ratio/mean": _masked_mean(ratio, mask_B_T),
            "ratio/max": ratio[keep].max(), "ratio/min": ratio[keep].min()}


@dataclass(frozen=True)
class LossSpec:
    """The settings of `grpo_loss`, chosen once at build time (functions, not names re-tested per
    call). The defaults are plain GRPO: token-mean, symmetric clip 0.2, no KL, no entropy term.

    kl_fn: a `rlvr.algo.kl` estimator; agg_fn: one of `AGGREGATIONS` (Dr. GRPO's bound to the
    generation budget by `with_budget`); log_ratio_fn / policy_fn: the ratio level and surrogate
    (`rlvr.algo.variants`); top_entropy_quantile < 1: only that share of tokens by entropy gets the
    surrogate (`variants.high_entropy_mask`, over the tokens of one call).
    """

    eps_low: float = 0.2
    eps_high: float = 0.2
    dual_clip: float = 0.0
    beta: float = 0.0
    kl_fn: Callable[[Tensor, Tensor], Tensor] = kl_k3
    agg_fn: Callable[..., Tensor] = token_mean
    entropy_coef: float = 0.0
    log_ratio_fn: Callable[..., Tensor] = token_log_ratio
    policy_fn: Callable[..., tuple[Tensor, Tensor, Tensor]] = ppo_surrogate
    top_entropy_quantile: float = 1.0
    distill_coef: float = 0.0            # λ of the teacher's per-token reverse KL (`distill_advantage`)
    distill_only: bool = False           # pure distillation: the verifier's advantages leave the loss

    @property
    def counts_tokens(self) -> bool:
        """The normaliser is a token count (token-mean); else a sequence count."""
        return self.agg_fn is token_mean

    @property
    def divides_by_padded_length(self) -> bool:
        """Dr. GRPO's aggregation with no budget bound divides by the padded length T, so cutting
        padding columns would change the loss."""
        return self.agg_fn is seq_mean_token_sum_norm

    @property
    def zero_advantage_inert(self) -> bool:
        """A zero-advantage row adds nothing: no KL or entropy term, and no entropy quantile that
        its tokens would move."""
        return (self.beta == 0 and self.entropy_coef == 0 and self.top_entropy_quantile >= 1.0
                and self.distill_coef == 0)

    def with_budget(self, budget: int) -> "LossSpec":
        """Dr. GRPO divides by the generation budget (max_new_tokens), as the paper and TRL do."""
        if not self.divides_by_padded_length:
            return self
        return replace(self, agg_fn=functools.partial(seq_mean_token_sum_norm, budget=budget))


def distill_advantage(adv: Tensor, old_logp: Tensor, teacher_logp: Tensor, mask: Tensor,
                      coef: float, only: bool = False) -> tuple[Tensor, dict[str, Tensor]]:
    """On-policy distillation as a per-token advantage: A_t = A − coef · sg(log π_old(y_t) − log π_T(y_t)).

    Follows Thinking Machines' "On-Policy Distillation" (Lu et al., 2025, Tinker cookbook): the
    student samples, the teacher scores each sampled token, the negative per-token reverse KL
    sample k1 = log π_s − log π_T is the token's advantage with discount 0 (no sum over later
    tokens), and the policy-gradient surrogate turns it into a loss whose value at ratio 1 is
    coef · k1 and whose gradient is coef · k1 · ∇log π_s — the score-function gradient of
    KL(π_s ‖ π_T) per position. Added to the verifier's advantage as slime/verl's OPD do
    (Â_t = A_t − λ·KL_t), so both go through the same surrogate. Deviations: the surrogate is the
    run's (`LossSpec.policy_fn`: PPO's clip, so with μ > 1 a token's distillation step is clipped
    like its RL step; Tinker's is unclipped importance sampling; identical when μ = 1); k1 uses the
    trainer's π_old (recomputed at the step's start), not the engine's behaviour log-probs; no
    full-vocabulary KL (TRL's GKD needs the teacher's logits, this needs one log-prob per token).
    `only`: the verifier's advantage is dropped (pure distillation). Teacher = student gives k1 = 0,
    so pure distillation has loss 0 and gradient 0 there.

    adv [B] or [B, T]; old_logp, teacher_logp, mask [B, T]. Padding gets k1 = 0 (a nan there must
    not reach the gradient through a where()). Returns (advantage [B, T], statistics over mask:
    "distill/kl", "distill/teacher_logp", "distill/student_logp").
    """
    keep = mask.bool()
    k1 = torch.where(keep, (old_logp - teacher_logp).detach(), torch.zeros_like(old_logp))
    base = torch.zeros_like(k1) if only else (adv if adv.dim() == 2 else adv[:, None]).to(k1.dtype)
    stats = {"distill/kl": _masked_mean(k1, mask),
             "distill/teacher_logp": _masked_mean(torch.where(keep, teacher_logp, 0.0), mask),
             "distill/student_logp": _masked_mean(old_logp, mask)}
    return base - coef * k1, stats


def grpo_loss(logp: Tensor, old_logp: Tensor, adv: Tensor, mask: Tensor, spec: LossSpec = LossSpec(),
              *, ref_logp: Tensor | None = None, entropy: Tensor | None = None,
              norm: float | None = None, is_weight: Tensor | None = None,
              teacher_logp: Tensor | None = None) -> tuple[Tensor, dict[str, Tensor]]:
    """GRPO objective (arXiv:2402.03300 Eq. 3) as a scalar loss to minimise, plus statistics.

    loss = agg_fn(surrogate + beta·kl − entropy_coef·entropy, mask, norm=norm), the settings from
    `spec`, with the surrogate from `clipped_surrogate` and kl = kl_fn(logp, ref_logp). Deviations
    from the paper, each opt-in: eps_high ≠ eps_low (DAPO), dual_clip, the aggregation (`AGGREGATIONS`), the
    entropy bonus (not in GRPO). The beta and entropy terms are skipped entirely when their
    coefficient is 0, so a nan in an unused input cannot reach the loss. is_weight [B, T] (from
    `rlvr.algo.offpolicy.is_weights`) multiplies the surrogate only, not the KL or entropy terms
    (as TRL does): it corrects for tokens sampled by a behaviour policy other than π_old.
    The variants (`rlvr.algo.variants`): log_ratio_fn is the ratio level (token or GSPO's
    sequence), policy_fn the surrogate (PPO's clip or CISPO), top_entropy_quantile the share of
    tokens that get the surrogate (needs `entropy`; the others still count in the normaliser, as
    in TRL).

    Statistics (detached float scalars, means over unmasked tokens): "clip_ratio/low_mean",
    "clip_ratio/high_mean", "clip_ratio/region_mean", "ratio/mean", "ratio/max", "ratio/min",
    plus "kl" only when ref_logp is given and "entropy" only when entropy is given. Statistics are
    over THIS call's tokens, whatever `norm` says: average them across minibatches yourself.
    teacher_logp [B, T] (with `spec.distill_coef`): the teacher's log-probs of the same tokens at
    the same temperature; `distill_advantage` folds its reverse KL into the advantage and adds the
    "distill/*" statistics.
    Shapes: logp, old_logp, mask, ref_logp, entropy [B, T]; adv [B] or [B, T].
    """
    stats: dict[str, Tensor] = {}
    if teacher_logp is not None:
        adv, dstats = distill_advantage(adv, old_logp, teacher_logp, mask, spec.distill_coef,
                                        spec.distill_only)
        stats.update(dstats)
    per_token, low, high = spec.policy_fn(spec.log_ratio_fn(logp, old_logp, mask), logp, adv,
                                          spec.eps_low, spec.eps_high, spec.dual_clip)
    if is_weight is not None:
        per_token = per_token * is_weight.detach()
    if spec.top_entropy_quantile < 1.0:
        if entropy is None:
            raise ValueError("LossSpec.top_entropy_quantile < 1 needs the entropy")
        keep = high_entropy_mask(entropy, mask, spec.top_entropy_quantile)
        per_token = torch.where(keep, per_token, torch.zeros_like(per_token))
    if ref_logp is not None:
        kl = spec.kl_fn(logp, ref_logp)
        if spec.beta != 0.0:
            per_token = per_token + spec.beta * kl
        stats["kl"] = _masked_mean(kl.detach(), mask)
    if entropy is not None:
        if spec.entropy_coef != 0.0:
            per_token = per_token - spec.entropy_coef * entropy
        stats["entropy"] = _masked_mean(entropy.detach(), mask)
    loss = spec.agg_fn(per_token, mask, norm=norm)
    stats["clip_ratio/low_mean"] = _masked_mean(low, mask)
    stats["clip_ratio/high_mean"] = _masked_mean(high, mask)
    stats["clip_ratio/region_mean"] = _masked_mean(low | high, mask)
    stats.update(_ratio_stats(logp, old_logp, mask))
    return loss, stats
