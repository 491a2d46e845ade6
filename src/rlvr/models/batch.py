"""The padded batch of one update: what the training forward backends (`rlvr.models.backends`,
`rlvr.training.forward`) read and the update plan cuts into minibatches.

`build_batch` turns scored groups into one row per completion: prompts left-padded, completions
right-padded, one advantage per row, the engine's behaviour log-probs, the loss mask of agent
episodes and which completions hit the generation budget. Guaranteed: `rows`, `trimmed` and
`to` keep every row's values (positions come from the masks). Not guaranteed: anything about
ids beyond a model's vocabulary (the engine samples within it).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import torch

from rlvr.algo.variants import mask_truncated
from rlvr.models.device import Device
from rlvr.models.policy import left_pad, right_pad
from rlvr.types import Group


@dataclass
class Batch:
    prompt_ids: torch.Tensor        # [B, Tp] left-padded
    prompt_mask: torch.Tensor       # [B, Tp]
    completion_ids: torch.Tensor    # [B, Tc] right-padded
    completion_mask: torch.Tensor   # [B, Tc]
    advantages: torch.Tensor        # [B]
    sampling_logp: torch.Tensor     # [B, Tc] log-probs recorded by the rollout engine
    # [B, Tc] 1 on tokens that get gradient; None means completion_mask. Agent episodes set it to
    # 0 on environment tokens, which stay in completion_mask: the model attends to them.
    loss_mask: torch.Tensor | None = None
    # [B] bool: the completion hit the generation budget (finish_reason "length", or "tokens" for
    # an agent episode); None: unknown
    truncated: torch.Tensor | None = None

    def __len__(self) -> int:
        return self.advantages.shape[0]

    def to(self, device: Device) -> "Batch":
        p_ids, p_mask, c_ids, c_mask, adv, logp = (device.to(t) for t in self._dense())
        return Batch(p_ids, p_mask, c_ids, c_mask, adv, logp,
                     loss_mask=None if self.loss_mask is None else device.to(self.loss_mask),
                     truncated=None if self.truncated is None else device.to(self.truncated))

    def rows(self, index: torch.Tensor) -> "Batch":
        p_ids, p_mask, c_ids, c_mask, adv, logp = (t[index] for t in self._dense())
        return Batch(p_ids, p_mask, c_ids, c_mask, adv, logp,
                     loss_mask=None if self.loss_mask is None else self.loss_mask[index],
                     truncated=None if self.truncated is None else self.truncated[index])

    def _dense(self) -> tuple[torch.Tensor, ...]:
        """The six tensors every batch has, in constructor order."""
        return (self.prompt_ids, self.prompt_mask, self.completion_ids, self.completion_mask,
                self.advantages, self.sampling_logp)

    def train_mask(self) -> torch.Tensor:
        """[B, Tc] float: the tokens the loss counts (model tokens, not padding or environment)."""
        return (self.completion_mask if self.loss_mask is None else self.loss_mask).float()

    def trimmed(self, completions: bool = True) -> "Batch":
        """Without columns that are padding in every row (left of the prompts; right of the
        completions when `completions`): positions come from the mask, so logits are unchanged."""
        tp = max(1, int(self.prompt_mask.sum(-1).max()))
        tc = max(1, int(self.completion_mask.sum(-1).max())) if completions else self.completion_ids.shape[1]
        return Batch(self.prompt_ids[:, -tp:], self.prompt_mask[:, -tp:], self.completion_ids[:, :tc],
                     self.completion_mask[:, :tc], self.advantages, self.sampling_logp[:, :tc],
                     None if self.loss_mask is None else self.loss_mask[:, :tc], self.truncated)

    def without_truncated(self) -> "Batch":
        """The batch with truncated completions out of the loss (`variants.mask_truncated`); the
        model still attends to their tokens, and they keep their place in the group."""
        if self.truncated is None:
            return self
        return replace(self, loss_mask=mask_truncated(self.train_mask(), self.truncated))


def build_batch(groups: Sequence[Group], advantages_P_G: torch.Tensor, pad_id: int) -> Batch:
    prompts, completions, logps, advs, masks, cut = [], [], [], [], [], []
    for p, group in enumerate(groups):
        for g, c in enumerate(group.completions):
            cut.append(c.finish_reason in ("length", "tokens"))   # "tokens": an episode out of budget
            prompts.append(group.prompt_ids)
            completions.append(c.token_ids)
            masks.append(c.loss_mask)
            logps.append(c.logprobs)
            advs.append(float(advantages_P_G[p, g]))
    prompt_ids, prompt_mask = left_pad(prompts, pad_id)
    completion_ids, completion_mask = right_pad(completions, pad_id)
    sampling_logp = torch.zeros(completion_ids.shape)
    for i, lp in enumerate(logps):
        sampling_logp[i, :len(lp)] = torch.tensor(lp)
    loss_mask = None
    if any(m is not None for m in masks):
        loss_mask = completion_mask.clone()
        for i, m in enumerate(masks):
            if m is not None:
                loss_mask[i, :len(m)] = torch.tensor(m, dtype=loss_mask.dtype)
    return Batch(prompt_ids, prompt_mask, completion_ids, completion_mask,
                 torch.tensor(advs, dtype=torch.float32), sampling_logp, loss_mask,
                 torch.tensor(cut, dtype=torch.bool))
