"""Per-completion advantages from a [P, G] reward matrix (P problems, G completions each).

Guaranteed: a group whose rewards are all equal gets advantages that are exactly 0.0 in every
mode (not merely close to 0), so the loop can drop zero-signal groups by testing `== 0`.
Not guaranteed: anything about groups of size 1 (RLOO raises; the other modes return 0).
Pure functions: no devices, no config objects, no logging.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Callable

import torch
from torch import Tensor

_SCALES = ("group", "batch", "none")


def _check_rewards(rewards_P_G: Tensor) -> None:
    if rewards_P_G.dim() != 2:
        raise ValueError(f"rewards must be [P, G]; got shape {tuple(rewards_P_G.shape)}")


def _zero_where_constant(adv_P_G: Tensor, rewards_P_G: Tensor) -> Tensor:
    # Float means of equal values can be off by one ulp (e.g. three 0.3s), leaving tiny non-zero
    # advantages that a division by a tiny std would blow up; constant groups carry no signal.
    constant_P_1 = (rewards_P_G == rewards_P_G[:, :1]).all(dim=1, keepdim=True)
    return torch.where(constant_P_1, torch.zeros_like(adv_P_G), adv_P_G)


def group_advantages(rewards_P_G: Tensor, scale: str = "group", eps: float = 1e-6) -> Tensor:
    """GRPO advantage (Shao et al., arXiv:2402.03300, §4.1.2 "outcome supervision").

    A_ij = (r_ij − mean_j r_ij) / (std + eps), where the std is chosen by `scale`:
      - "group": the std of group i's rewards (GRPO as published).
      - "batch": the std of all P·G rewards of the batch, while the mean stays per group. This is
        TRL's `scale_rewards="batch"` (group-level mean, batch-level std, as in "Lite PPO",
        arXiv:2508.08221); it is not verl's REINFORCE++ whitening, which also re-centres on the
        batch mean.
      - "none": no division (Dr. GRPO, Liu et al., arXiv:2503.20783, which argues the std term
        up-weights too-easy and too-hard questions).

    Deviation: we use the POPULATION std (divide by G, `unbiased=False`), whereas the GRPO paper
    does not say and TRL uses torch's unbiased std (divide by G−1). With the population std the
    advantages of a group have unit mean square, and the value does not depend on the Bessel
    correction for small G. For rewards 1 0 0 1 1 0 0 0 this gives +1.291 / −0.775; the
    unbiased std gives +1.208 / −0.725. `eps` is added to the std (as TRL and verl do).

    rewards_P_G: [P, G] float. Returns [P, G].
    """
    _check_rewards(rewards_P_G)
    if scale not in _SCALES:
        raise ValueError(f"unknown advantage scale {scale!r}; expected one of {', '.join(_SCALES)}")
    rewards = rewards_P_G.float() if not rewards_P_G.is_floating_point() else rewards_P_G
    centred = rewards - rewards.mean(dim=1, keepdim=True)
    if scale == "group":
        centred = centred / (rewards.std(dim=1, keepdim=True, unbiased=False) + eps)
    elif scale == "batch":
        centred = centred / (rewards.std(unbiased=False) + eps)
    return _zero_where_constant(centred, rewards)


def rloo_advantages(rewards_P_G: Tensor) -> Tensor:
    """REINFORCE Leave-One-Out (Ahmadian et al., arXiv:2402.14740, Eq. 7 in advantage form).

    A_ij = r_ij − mean_{k≠j} r_ik = G/(G−1) · (r_ij − mean_k r_ik). No std scaling, as in the
    paper. Needs G ≥ 2. rewards_P_G: [P, G]. Returns [P, G].
    """
    _check_rewards(rewards_P_G)
    g = rewards_P_G.shape[1]
    if g < 2:
        raise ValueError(f"RLOO needs at least 2 completions per group; got G={g}")
    rewards = rewards_P_G.float() if not rewards_P_G.is_floating_point() else rewards_P_G
    baseline = (rewards.sum(dim=1, keepdim=True) - rewards) / (g - 1)
    return _zero_where_constant(rewards - baseline, rewards)


def _nan_group_stats(x: Tensor, dims: tuple[int, ...]) -> tuple[Tensor, Tensor]:
    """Mean and population std over `dims`, ignoring NaN entries (a term that did not apply)."""
    mean = x.nanmean(dim=dims, keepdim=True)
    std = ((x - mean) ** 2).nanmean(dim=dims, keepdim=True).sqrt()
    return mean, std


def _constant(x: Tensor, dims: tuple[int, ...]) -> Tensor:
    """True where every non-NaN entry along `dims` is equal (an all-NaN slice counts as constant)."""
    hi = torch.where(x.isnan(), torch.full_like(x, -math.inf), x).amax(dim=dims, keepdim=True)
    lo = torch.where(x.isnan(), torch.full_like(x, math.inf), x).amin(dim=dims, keepdim=True)
    return (hi <= lo) | x.isnan().all(dim=dims, keepdim=True)


def decoupled_advantages(terms_P_G_K: Tensor, weights_K: Tensor, eps: float = 1e-6) -> Tensor:
    """GDPO (Group reward-Decoupled normalisation, arXiv:2601.05242; TRL's
    `multi_objective_aggregation="normalize_then_sum"`, verl's GDPO).

    Each of the K reward terms is normalised within its group, z_ijk = (r_ijk − mean_j r_ijk) /
    (std_j r_ijk + eps); the weighted sum s_ij = Σ_k w_k z_ijk is then whitened over the batch,
    A_ij = (s_ij − mean s) / (std s + eps). A term with a large spread no longer drowns the others,
    which it does when the weighted SUM is normalised as one number (`group_advantages`).

    NaN marks a term that did not apply to a completion (a TRL reward function's None): it is left
    out of that term's group statistics and of the sum; a completion with no term at all is left
    out of the batch statistics and gets advantage 0 (as TRL does).

    Deviations from TRL: population std (divide by n, as `group_advantages`) where TRL divides by
    n − 1, and eps = 1e-6 where TRL adds 1e-4; with no NaN, TRL's advantages are ours times
    sqrt((N − 1) / N) for N = P·G, up to the eps terms. A term constant within its group
    contributes exactly 0, and a group whose sum is constant gets advantages exactly 0 (TRL leaves
    −mean s / std s there, a value ~1e-8 since each group's z sum to 0).

    terms_P_G_K: [P, G, K] float, NaN where a term did not apply. weights_K: [K]. Returns [P, G].
    """
    if terms_P_G_K.dim() != 3 or weights_K.shape != terms_P_G_K.shape[2:]:
        raise ValueError(f"terms must be [P, G, K] and weights [K]; got {tuple(terms_P_G_K.shape)} "
                         f"and {tuple(weights_K.shape)}")
    terms = terms_P_G_K.double()
    mean, std = _nan_group_stats(terms, (1,))
    z = torch.where(_constant(terms, (1,)), torch.zeros_like(terms), (terms - mean) / (std + eps))
    none_P_G = terms.isnan().all(dim=2)
    s = torch.where(none_P_G, torch.full_like(none_P_G, math.nan, dtype=terms.dtype),
                    (z.nan_to_num(0.0) * weights_K.double()).sum(dim=2))     # [P, G]
    s_mean, s_std = _nan_group_stats(s, (0, 1))
    adv = (s - s_mean) / (s_std + eps)
    adv = torch.where(_constant(s, (1,)), torch.zeros_like(adv), adv).nan_to_num(0.0)
    return adv.to(terms_P_G_K.dtype if terms_P_G_K.is_floating_point() else torch.float32)


ADVANTAGES: dict[str, Callable[[Tensor], Tensor]] = {
    "group": partial(group_advantages, scale="group"),
    "batch": partial(group_advantages, scale="batch"),
    "none": partial(group_advantages, scale="none"),
    "rloo": rloo_advantages,
}
