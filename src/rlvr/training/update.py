"""The policy update: μ passes of the GRPO loss over minibatches of a batch.

The batch (`rlvr.models.batch.Batch`, built by `build_batch`) holds padded tensors with one
advantage per sequence. `update_policy` runs μ passes over minibatches of the batch with the GRPO
loss from `rlvr.algo`.
With several minibatches each is one optimizer step whose gradient, at unchanged weights and
with nothing clipped, averages over a pass to the full-batch gradient.

Work that cannot change the gradient is skipped: when the loss has no KL and no entropy term, a
sequence whose advantage is exactly 0 contributes exactly 0 to the gradient, so it gets no forward
or backward pass; the loss normaliser still counts its tokens, so the update equals the one
computed on the whole batch. With μ = 1 and a single minibatch the old log-probs equal the current
ones detached (ratio 1), so no extra forward pass is made; otherwise they are computed once, before
the first update, under no_grad. The engine's behaviour log-probs are compared with these old
log-probs (`mismatch/*` metrics) and, when `UpdateSpec.is_weights` is set, weight the surrogate
(`rlvr.algo.offpolicy`); the weights come from the same old log-probs, so they cost no forward
pass. With `LossSpec.top_entropy_quantile` < 1 the entropy threshold is taken over the tokens of
one loss call (a minibatch, or a micro-batch when `micro_batch_tokens` splits it; one rank's share
under torchrun), and zero-advantage rows get forward passes since their tokens move it. With
`UpdateSpec.mask_truncated` completions that hit the generation budget leave the loss and its token
count (TRL's `mask_truncated_completions`). When every advantage is 0 the optimizer does not step at all
(AdamW would otherwise keep moving the weights on momentum alone; TRL does step).

Columns that are padding in every remaining row are cut before the forward pass (completion
columns only for aggregations that do not divide by the padded length). Which rows, orders, rank
shares, micro-batches and normalisers is decided by the pure plan in `rlvr.training.plan`; this
module runs it. The forward's backend (`rlvr.training.forward`: fused Llama, the model's own
forward, or the chunked GPU forward) is chosen once per update from what the model is, never per
micro-batch. On a GPU (`Compute.device`) minibatches are split into micro-batches of at most
`micro_batch_tokens` padded tokens whose gradients accumulate.

Under torchrun (`dp`, a `training.distributed.DataParallel`) every rank holds the whole batch and
runs the same minibatch order; each minibatch's rows are split across ranks and each rank's loss
is divided by the minibatch's global normaliser over the world size, so the gradient DDP/FSDP2
averages equals the one-process gradient. The non-finite skip decision is all-reduced; returned
statistics are means over ranks of each rank's means.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Callable

import torch

from rlvr.algo.losses import LossSpec, grpo_loss
from rlvr.algo.offpolicy import mismatch_metrics
from rlvr.models.batch import Batch
from rlvr.models.device import Device, host_heap_kept
from rlvr.training import forward
from rlvr.training.plan import Minibatch, Part, UpdatePlan, minibatches, pass_order, plan_update, split_rows


@dataclass(frozen=True)
class UpdateSpec:
    """How an update runs, chosen once at build time (`rlvr.training.state.update_spec`): the loss,
    the passes over the batch and the behaviour-policy correction. The defaults are plain GRPO
    (`LossSpec()`), μ = 1 over one minibatch, gradient clip 1."""

    loss: LossSpec = LossSpec()
    temperature: float = 1.0
    mu: int = 1
    minibatch_size: int = 0              # sequences per optimizer step (0: the whole batch)
    grad_clip: float = 1.0               # max gradient norm (0: no clipping)
    skip_zero_advantage: bool = True     # rows with advantage 0 get no forward when inert
    # behaviour-policy correction: `offpolicy.is_weights` with level/mode/cap bound, or None (off;
    # the mismatch metrics are reported either way)
    is_weights: Callable | None = None
    capped_metric: str = "mismatch/truncated_frac"
    mask_truncated: bool = False         # completions cut at the budget leave the loss


@dataclass(frozen=True)
class Compute:
    """Where and how the update computes: device, per-layer recomputation, token budget."""

    device: Device = Device.cpu()
    checkpointing: bool = False
    micro_batch_tokens: int = 0          # max padded tokens per forward/backward (0: no split)
    vocab_limit: int | None = None       # GPU path: ids >= this (padded vocabulary) left out


def _logp_and_entropy(model, batch: Batch, temperature: float, autocast: bool,
                      compute: Compute = Compute()):
    """One training forward of `model` on `batch`, its backend chosen for this call only (for
    callers outside the update; `update_policy` chooses once per model)."""
    return forward.choose(model, compute, autocast)(batch, temperature)


def update_policy(model, optimizer, batch: Batch, spec: UpdateSpec, *, reference=None,
                  autocast: bool = False, generator: torch.Generator | None = None,
                  compute: Compute | None = None, dp=None, teacher=None) -> dict[str, float]:
    """μ passes of clipped-surrogate updates over minibatches; returns mean statistics. `teacher`
    (a `training.teacher.Teacher`, with `LossSpec.distill_coef`): its log-probs of the update's
    rows, taken once before the passes at the update's temperature, enter the loss
    (`algo.losses.distill_advantage`)."""
    compute = compute or Compute()
    if spec.mask_truncated:
        batch = batch.without_truncated()
    # Trimming completion columns changes the padded length T, which an unbound Dr. GRPO divides by.
    trim = not spec.loss.divides_by_padded_length
    plan = plan_update(batch, counts_tokens=spec.loss.counts_tokens, trim_completions=trim, mu=spec.mu,
                       minibatch_size=spec.minibatch_size,
                       skip_zero=spec.skip_zero_advantage and spec.loss.zero_advantage_inert,
                       micro_batch_tokens=compute.micro_batch_tokens,
                       rank=dp.rank if dp is not None else 0, world=dp.world if dp is not None else 1)
    lr = float(optimizer.param_groups[0]["lr"])
    if plan.empty:
        return {"active_fraction": 0.0, "optimizer_steps": 0.0, "lr": lr}
    stats: dict[str, list[float]] = {"active_fraction": [float(plan.active.float().mean())]}
    # on a CPU the update's large temporaries stay in the C heap from one micro-batch to the next
    # (`host_heap_kept`); the run returns the heap at the next step's start
    with contextlib.nullcontext() if compute.device.is_cuda else host_heap_kept():
        work = batch.rows(plan.rows).trimmed(completions=trim).to(compute.device)
        step = _Step(model, optimizer, forward.choose(model, compute, autocast), spec, plan, work, dp, stats)
        if spec.loss.beta > 0:
            # in the policy's precision: the same numbers as the policy's at step 0
            step.ref_logp = _no_grad(forward.choose(reference, compute, autocast), work, spec.temperature,
                                     plan.micro_batch_tokens)
        if teacher is not None:
            step.teacher_logp = score_rows(teacher, work, spec.temperature, compute.micro_batch_tokens, dp)
        steps = _passes(step, generator)
    out = {k: sum(v) / len(v) for k, v in stats.items()}
    if dp is not None:
        out = dp.all_mean(out)
    out["optimizer_steps"] = float(steps)
    out["lr"] = lr
    return out


def score_rows(teacher, work: Batch, temperature: float, micro_batch_tokens: int = 0,
               dp=None) -> torch.Tensor:
    """The teacher's [B, Tc] log-probs of `work`. Under torchrun (`dp`) every rank holds all rows
    and scores only rows rank, rank + world, ...; one all-gather gives each rank the whole."""
    if dp is None or dp.world == 1:
        return teacher.logprobs(work, temperature, micro_batch_tokens)
    mine = torch.arange(len(work))[dp.rank::dp.world]
    part = (teacher.logprobs(work.rows(mine), temperature, micro_batch_tokens).cpu() if len(mine)
            else torch.zeros(0, work.completion_ids.shape[1]))
    out = torch.zeros(work.completion_ids.shape, dtype=part.dtype)
    for rank, rows in enumerate(dp.all_gather(part)):
        out[rank::dp.world] = rows
    return out.to(work.completion_ids.device)


def _passes(step: "_Step", generator: torch.Generator | None) -> int:
    """The update's μ passes over its minibatches (`update_policy`'s body); optimizer steps taken."""
    spec, plan = step.spec, step.plan
    if not plan.single_pass:
        step.prepare_old(_no_grad(step.forward, step.work, spec.temperature,
                                   plan.micro_batch_tokens))
    # Each minibatch of `size` sequences of the full batch is one optimizer step, normalised by
    # its share of the whole batch's normaliser (TRL's dapo rescales per accumulation window the
    # same way): every step has the full-batch gradient's scale, and over one pass the minibatch
    # gradients AVERAGE to the full-batch gradient (they do not add up to it).
    steps = 0
    for _ in range(spec.mu):
        for mb in minibatches(plan, pass_order(plan, generator)):
            step.run(mb)
            steps += 1
    if step.seen:
        _mismatch_stats(spec, step.seen, step.stats)
    return steps


class _Step:
    """One optimizer step per minibatch, from the update's fixed inputs (forward, plan, old and
    reference log-probs, importance weights)."""

    def __init__(self, model, optimizer, fwd: forward.Forward, spec: UpdateSpec, plan: UpdatePlan,
                 work: Batch, dp, stats: dict[str, list[float]]):
        self.model, self.optimizer, self.forward, self.spec, self.plan = model, optimizer, fwd, spec, plan
        self.work, self.dp, self.stats = work, dp, stats
        self.ref_logp: torch.Tensor | None = None
        self.teacher_logp: torch.Tensor | None = None
        self.old_logp: torch.Tensor | None = None
        self.weights: torch.Tensor | None = None
        self.seen: list = []          # (old log-probs, rows, capped) for the mismatch/* metrics

    def prepare_old(self, old_logp: torch.Tensor) -> None:
        self.old_logp = old_logp
        self.weights, capped = _is_weights(self.spec, old_logp, self.work)
        self.seen.append((old_logp, self.work, capped))

    def run(self, mb: Minibatch) -> None:
        rows = self.work.rows(mb.rows)
        self.optimizer.zero_grad(set_to_none=True)
        loss = torch.zeros(())
        # Micro-batches add up to the minibatch's loss: each part's normaliser is the
        # minibatch's, so the summed gradients equal one backward over the whole minibatch.
        with forward.minibatch(self.forward, len(mb.parts)):
            for part in mb.parts:
                part_loss = self._part_loss(rows if part.rows is None else rows.rows(part.rows), mb, part)
                part_loss = part_loss * (mb.weight * part.weight)
                part_loss.backward()
                loss = part_loss.detach() if part.rows is None else loss + part_loss.detach().cpu()
        grad_norm = _step(self.model, self.optimizer, loss, self.spec.grad_clip, self.dp)
        self.stats.setdefault("loss", []).append(float(loss))
        self.stats.setdefault("grad_norm", []).append(grad_norm)

    def _part_loss(self, sub: Batch, mb: Minibatch, part: Part) -> torch.Tensor:
        logp, entropy = self.forward(sub, self.spec.temperature)
        old = logp.detach() if self.old_logp is None else _pick(self.old_logp, mb.rows, part.rows)
        if self.plan.single_pass:   # weights from this forward's own detached log-probs
            part_weights, capped = _is_weights(self.spec, old, sub)
            self.seen.append((old, sub, capped))
        else:
            part_weights = None if self.weights is None else _pick(self.weights, mb.rows, part.rows)
        ref = None if self.ref_logp is None else _pick(self.ref_logp, mb.rows, part.rows)
        teacher = None if self.teacher_logp is None else _pick(self.teacher_logp, mb.rows, part.rows)
        part_loss, mstats = grpo_loss(logp, old, sub.advantages, sub.train_mask(), self.spec.loss,
                                      ref_logp=ref, entropy=entropy, norm=self.plan.norm,
                                      is_weight=part_weights, teacher_logp=teacher)
        for k, v in mstats.items():
            self.stats.setdefault(k, []).append(float(v))
        return part_loss


def _pick(values: torch.Tensor, chunk: torch.Tensor, part: torch.Tensor | None) -> torch.Tensor:
    return values[chunk] if part is None else values[chunk][part]


def _is_weights(spec: UpdateSpec, old_logp: torch.Tensor, rows: Batch):
    """(importance weights π_old / μ [B, T], capped [B, T]) for `rows`, or (None, None) when the
    correction is off."""
    if spec.is_weights is None:
        return None, None
    return spec.is_weights(old_logp, rows.sampling_logp, rows.train_mask())   # model tokens only


def _mismatch_stats(spec: UpdateSpec, parts: list, stats: dict[str, list[float]]) -> None:
    """The mismatch metrics over all (old log-probs, rows, capped) parts of the update, together."""
    old = torch.cat([o for o, _, _ in parts])
    behaviour = torch.cat([r.sampling_logp for _, r, _ in parts])
    mask = torch.cat([r.train_mask() for _, r, _ in parts])
    capped = None if parts[0][2] is None else torch.cat([c for _, _, c in parts])
    for k, v in mismatch_metrics(old, behaviour, mask, capped, spec.capped_metric).items():
        stats[k] = [float(v)]


def _step(model, optimizer, loss: torch.Tensor, grad_clip: float, dp=None) -> float:
    """Clip and apply the gradients already accumulated by backward (skipped when non-finite)."""
    params = [p for p in model.parameters() if p.grad is not None]
    if grad_clip > 0 or dp is not None:   # sharded gradients: clip_grad_norm_ reduces the norm
        norm = torch.nn.utils.clip_grad_norm_(params, grad_clip if grad_clip > 0 else math.inf)
        grad_norm = float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)
    else:
        grad_norm = float(torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in params])))
    bad = not math.isfinite(grad_norm) or not math.isfinite(float(loss.detach()))
    if dp is not None:   # every rank takes the same decision
        bad = dp.all_mean({"bad": float(bad)})["bad"] > 0
    if bad:
        optimizer.zero_grad(set_to_none=True)
        return float("nan")
    optimizer.step()
    return grad_norm


@torch.no_grad()
def _no_grad(fwd: forward.Forward, batch: Batch, temperature: float, max_tokens: int) -> torch.Tensor:
    """Log-probs [B, Tc] of `batch` in micro-batches of at most `max_tokens` padded tokens (the
    update's plan), never the whole batch in one forward."""
    parts = split_rows(len(batch), batch.prompt_ids.shape[1] + batch.completion_ids.shape[1], max_tokens)
    return torch.cat([fwd(batch if rows is None else batch.rows(rows), temperature)[0] for rows in parts])
