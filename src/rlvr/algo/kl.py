"""Per-token estimators of KL(π_θ ‖ π_ref) from log-probs of tokens sampled from π_θ.

Schulman, "Approximating KL Divergence" (http://joschu.net/blog/kl-approx.html). With
log r = ref_logp − logp (samples come from the policy):
  k1 = −log r                 unbiased, high variance, can be negative per token;
  k2 = (log r)² / 2           biased, low variance, always ≥ 0;
  k3 = (r − 1) − log r        unbiased, low variance, always ≥ 0 (the one GRPO uses,
                              arXiv:2402.03300 Eq. 4).
Deviation: log r is clamped to ±LOG_RATIO_CLAMP before use (as verl does) so that exp() cannot
overflow to inf on tokens where the two models disagree wildly; beyond the clamp the estimate
saturates and its gradient is zero. Inputs and outputs are [B, T]; padding is not masked here.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor

# exp(20) ≈ 5e8: far outside any clip range, yet finite in float32 and bfloat16. Every log ratio
# in `rlvr.algo` (KL, the policy ratio, importance weights) is clamped to it before exp().
LOG_RATIO_CLAMP = 20.0


def _log_ratio(logp: Tensor, ref_logp: Tensor) -> Tensor:
    return (ref_logp - logp).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)


def kl_k1(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """k1 = logp − ref_logp (the naive log-ratio estimator). [B, T] → [B, T]."""
    return -_log_ratio(logp, ref_logp)


def kl_k2(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """k2 = ½ (logp − ref_logp)². [B, T] → [B, T]."""
    return 0.5 * _log_ratio(logp, ref_logp).square()


def kl_k3(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """k3 = exp(ref_logp − logp) − (ref_logp − logp) − 1, as in GRPO. [B, T] → [B, T]."""
    log_r = _log_ratio(logp, ref_logp)
    return torch.expm1(log_r) - log_r


KL_ESTIMATORS: dict[str, Callable[[Tensor, Tensor], Tensor]] = {
    "k1": kl_k1,
    "k2": kl_k2,
    "k3": kl_k3,
}
