"""Per-completion advantages from a [P, G] reward matrix (P problems, G completions each).

Guaranteed: a group whose rewards are all equal gets advantages that are exactly 0.0 in every
mode (not merely close to 0), so the loop can drop zero-signal groups by testing `== 0`.
Not guaranteed: anything about groups of size 1 (RLOO raises; the other modes return 0).
Pure functions: no devices, no config objects, no logging.
"""

from __future__ import annotations

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


ADVANTAGES: dict[str, Callable[[Tensor], Tensor]] = {
    "group": partial(group_advantages, scale="group"),
    "batch": partial(group_advantages, scale="batch"),
    "none": partial(group_advantages, scale="none"),
    "rloo": rloo_advantages,
}
