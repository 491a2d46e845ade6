"""The minibatch plan of one policy update: which rows, in which order, on which rank, in which
micro-batches, and with which normaliser. Pure: tensors and numbers in, a plan out, no model.

`plan_update` fixes everything that does not depend on the pass: the rows that get a forward pass
(a sequence whose advantage is exactly 0 contributes exactly 0 to the gradient when the loss has no
KL and no entropy term), the loss normaliser (counted over the whole batch, skipped rows
included), the number of minibatches, and whether the update is a single pass (μ = 1, one
minibatch: no old-log-prob forward). `pass_order` draws one pass's order, from the generator only
when there are several minibatches and one pass at a time: without an explicit generator the draw
comes from the global one, which dropout in the forward passes also draws from, so the order of
draws matters. `minibatches` cuts an order into minibatches, gives each rank its share (rows rank,
rank + world, …; a rank left without rows runs row 0 with weight 0, so it still enters the
gradient collectives) and splits each share into micro-batches of at most `micro_batch_tokens`
padded tokens. Under torchrun every rank runs the same number of micro-batches (the most any rank
needs, since each backward enters the collectives); every rank holds the whole batch, so each
computes that number from all ranks' shares without a collective.

Guaranteed: a pure function of the batch, the options and the generator's state; with these shares
and normalisers the gradient the ranks average equals the one-process gradient. Not guaranteed:
anything about devices (indices are CPU tensors; they index device tensors as they are).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Part:
    """One micro-batch: rows of the rank's share (None: all of them) and its loss weight."""

    rows: torch.Tensor | None
    weight: float = 1.0


@dataclass(frozen=True)
class Minibatch:
    """One optimizer step: this rank's rows of the active rows, their loss weight, the parts."""

    rows: torch.Tensor
    weight: float
    parts: tuple[Part, ...]


@dataclass(frozen=True)
class UpdatePlan:
    active: torch.Tensor        # [B] bool: rows that get a forward pass
    rows: torch.Tensor          # indices of the active rows in the batch
    norm: float                 # the loss normaliser of one rank's part of one minibatch
    n_minibatches: int
    single_pass: bool           # μ = 1 and one minibatch: old log-probs are the current ones
    width: int                  # padded tokens per row of the trimmed active rows
    micro_batch_tokens: int
    rank: int = 0
    world: int = 1

    @property
    def empty(self) -> bool:
        return self.rows.numel() == 0


def plan_update(batch, *, counts_tokens: bool, trim_completions: bool, mu: int = 1,
                minibatch_size: int = 0, skip_zero: bool = False, micro_batch_tokens: int = 0,
                rank: int = 0, world: int = 1) -> UpdatePlan:
    """The pass-independent plan for `batch` (a `rlvr.models.batch.Batch`). `counts_tokens`: the normaliser
    is the batch's loss-token count, else its sequence count; `skip_zero`: rows with advantage 0
    get no forward pass (only valid when the loss has no KL and no entropy term)."""
    mask = batch.train_mask()
    norm_total = float(mask.sum()) if counts_tokens else float(len(batch))
    active = batch.advantages != 0 if skip_zero else torch.ones(len(batch), dtype=torch.bool)
    rows = torch.nonzero(active).squeeze(-1)
    size = minibatch_size or len(batch)
    n_minibatches = max(1, math.ceil(len(batch) / size))
    width = 0
    if rows.numel():
        work = batch.rows(rows).trimmed(completions=trim_completions)
        width = work.prompt_ids.shape[1] + work.completion_ids.shape[1]
    return UpdatePlan(active, rows, norm_total / n_minibatches / world, n_minibatches,
                      mu == 1 and size >= len(batch), width, micro_batch_tokens, rank, world)


def pass_order(plan: UpdatePlan, generator: torch.Generator | None = None) -> torch.Tensor:
    """One pass's order of the active rows: a permutation when there are several minibatches."""
    n = len(plan.rows)
    return torch.randperm(n, generator=generator) if plan.n_minibatches > 1 else torch.arange(n)


def minibatches(plan: UpdatePlan, order: torch.Tensor) -> list[Minibatch]:
    """The pass's minibatches, for this rank (indices into the active rows)."""
    out = []
    for chunk in torch.tensor_split(order, plan.n_minibatches):
        if chunk.numel() == 0:
            continue
        mine, weight = rank_share(chunk, plan.rank, plan.world)
        out.append(Minibatch(mine, weight, tuple(_parts(plan, chunk, len(mine)))))
    return out


def rank_share(chunk: torch.Tensor, rank: int, world: int) -> tuple[torch.Tensor, float]:
    """A rank's rows of a minibatch and the weight of its loss (row 0, weight 0 when it has none)."""
    if world == 1:
        return chunk, 1.0
    mine = chunk[rank::world]
    return (mine, 1.0) if mine.numel() else (chunk[:1], 0.0)


def split_rows(n_rows: int, width: int, max_tokens: int) -> list[torch.Tensor | None]:
    """Row index sets of at most `max_tokens` padded tokens (rows of `width`) each; [None] (no
    split) when `max_tokens` is 0 or all rows fit."""
    if max_tokens <= 0 or n_rows * width <= max_tokens:
        return [None]
    return list(torch.arange(n_rows).split(max(1, max_tokens // width)))


def _parts(plan: UpdatePlan, chunk: torch.Tensor, n_rows: int) -> list[Part]:
    split = split_rows(n_rows, plan.width, plan.micro_batch_tokens)
    if plan.world == 1:
        return [Part(p) for p in split]
    most = max(len(split_rows(len(rank_share(chunk, r, plan.world)[0]), plan.width,
                              plan.micro_batch_tokens)) for r in range(plan.world))
    if most == len(split):
        return [Part(p) for p in split]
    even = torch.tensor_split(torch.arange(n_rows), most)
    return [Part(p) if p.numel() else Part(torch.zeros(1, dtype=torch.long), 0.0) for p in even]
