"""From scored groups to a policy update: batch building and the optimisation step.

`build_batch` turns groups into padded tensors with one advantage per sequence. `update_policy`
runs μ passes over minibatches of the batch with the GRPO loss from `rlvr.algo`.
With several minibatches each is one optimizer step whose gradient, at unchanged weights and
with nothing clipped, averages over a pass to the full-batch gradient.

Work that cannot change the gradient is skipped: when the loss has no KL and no entropy term, a
sequence whose advantage is exactly 0 contributes exactly 0 to the gradient, so it gets no forward
or backward pass; the loss normaliser still counts its tokens, so the update equals the one
computed on the whole batch. With μ = 1 and a single minibatch the old log-probs equal the current
ones detached (ratio 1), so no extra forward pass is made; otherwise they are computed once, before
the first update, under no_grad. The engine's behaviour log-probs are compared with these old
log-probs (`mismatch/*` metrics) and, when `LossSpec.is_weights` is set, weight the surrogate
(`rlvr.algo.offpolicy`); the weights come from the same old log-probs, so they cost no forward
pass. With `LossSpec.top_entropy_quantile` < 1 the entropy threshold is taken over the tokens of
one loss call (a minibatch, or a micro-batch when `micro_batch_tokens` splits it; one rank's share
under torchrun), and zero-advantage rows get forward passes since their tokens move it. With
`LossSpec.mask_truncated` completions that hit the generation budget leave the loss and its token
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
from dataclasses import dataclass, replace
from typing import Callable, Sequence

import torch

from rlvr.algo.losses import grpo_loss, seq_mean_token_sum_norm
from rlvr.algo.offpolicy import mismatch_metrics
from rlvr.algo.variants import high_entropy_mask, mask_truncated, ppo_surrogate, token_log_ratio
from rlvr.models.device import Device, host_heap_kept
from rlvr.models.policy import left_pad, right_pad
from rlvr.training import forward
from rlvr.training.plan import Minibatch, Part, UpdatePlan, minibatches, pass_order, plan_update, split_rows
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


@dataclass(frozen=True)
class LossSpec:
    """The loss variant, chosen once at build time (callables, not strings re-tested per step)."""

    kl_fn: Callable
    agg_fn: Callable
    agg_counts_tokens: bool   # True: the normaliser is a token count; False: a sequence count
    eps_low: float
    eps_high: float
    dual_clip: float
    beta: float
    entropy_coef: float
    temperature: float
    # behaviour-policy correction: `offpolicy.is_weights` with level/mode/cap bound, or None (off;
    # the mismatch metrics are reported either way)
    is_weights: Callable | None = None
    capped_metric: str = "mismatch/truncated_frac"
    # the variants (`rlvr.algo.variants`): ratio level, surrogate, high-entropy share, truncation
    log_ratio_fn: Callable = token_log_ratio
    policy_fn: Callable = ppo_surrogate
    top_entropy_quantile: float = 1.0
    mask_truncated: bool = False


def default_loss_spec(temperature: float = 1.0) -> LossSpec:
    """Plain GRPO: token-mean, symmetric clip 0.2, no KL, no entropy term (experiments, tests)."""
    from rlvr.algo.kl import KL_ESTIMATORS
    from rlvr.algo.losses import AGGREGATIONS

    return LossSpec(kl_fn=KL_ESTIMATORS["k3"], agg_fn=AGGREGATIONS["token-mean"],
                    agg_counts_tokens=True, eps_low=0.2, eps_high=0.2, dual_clip=0.0, beta=0.0,
                    entropy_coef=0.0, temperature=temperature)


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


def update_policy(model, optimizer, batch: Batch, spec: LossSpec, *, mu: int = 1,
                  minibatch_size: int = 0, grad_clip: float = 1.0, skip_zero_advantage: bool = True,
                  reference=None, autocast: bool = False, generator: torch.Generator | None = None,
                  compute: Compute | None = None, dp=None) -> dict[str, float]:
    """μ passes of clipped-surrogate updates over minibatches; returns mean statistics."""
    compute = compute or Compute()
    if spec.mask_truncated:
        batch = batch.without_truncated()
    # Trimming completion columns changes the padded length T, which seq-mean-token-sum-norm divides by.
    trim = spec.agg_fn is not seq_mean_token_sum_norm
    plan = plan_update(batch, counts_tokens=spec.agg_counts_tokens, trim_completions=trim, mu=mu,
                       minibatch_size=minibatch_size,
                       skip_zero=skip_zero_advantage and _zero_rows_inert(spec),
                       micro_batch_tokens=compute.micro_batch_tokens,
                       rank=dp.rank if dp is not None else 0, world=dp.world if dp is not None else 1)
    lr = float(optimizer.param_groups[0]["lr"])
    if plan.empty:
        return {"active_fraction": 0.0, "optimizer_steps": 0.0, "lr": lr}
    stats: dict[str, list[float]] = {"active_fraction": [float(plan.active.float().mean())]}
    # on a CPU the update's large temporaries stay in the C heap from one micro-batch to the next
    # (`host_heap_kept`); the run returns the heap at the next step's start
    with contextlib.nullcontext() if compute.device.is_cuda else host_heap_kept():
        steps = _passes(model, optimizer, batch, spec, plan, trim, mu, grad_clip, reference, autocast,
                        generator, compute, dp, stats)
    out = {k: sum(v) / len(v) for k, v in stats.items()}
    if dp is not None:
        out = dp.all_mean(out)
    out["optimizer_steps"] = float(steps)
    out["lr"] = lr
    return out


def _passes(model, optimizer, batch: Batch, spec: LossSpec, plan: UpdatePlan, trim: bool, mu: int,
            grad_clip: float, reference, autocast: bool, generator, compute: Compute, dp,
            stats: dict[str, list[float]]) -> int:
    """The update's μ passes over its minibatches (`update_policy`'s body); optimizer steps taken."""
    work = batch.rows(plan.rows).trimmed(completions=trim).to(compute.device)
    step = _Step(model, optimizer, forward.choose(model, compute, autocast), spec, plan, work,
                 grad_clip, dp, stats)
    if spec.beta > 0:   # in the policy's precision: the same numbers as the policy's at step 0
        step.ref_logp = _no_grad(forward.choose(reference, compute, autocast), work, spec.temperature,
                                 plan.micro_batch_tokens)
    if not plan.single_pass:
        step.prepare_old(_no_grad(step.forward, work, spec.temperature, plan.micro_batch_tokens))
    # Each minibatch of `size` sequences of the full batch is one optimizer step, normalised by
    # its share of the whole batch's normaliser (TRL's dapo rescales per accumulation window the
    # same way): every step has the full-batch gradient's scale, and over one pass the minibatch
    # gradients AVERAGE to the full-batch gradient (they do not add up to it).
    steps = 0
    for _ in range(mu):
        for mb in minibatches(plan, pass_order(plan, generator)):
            step.run(mb)
            steps += 1
    if step.seen:
        _mismatch_stats(spec, step.seen, stats)
    return steps


class _Step:
    """One optimizer step per minibatch, from the update's fixed inputs (forward, plan, old and
    reference log-probs, importance weights)."""

    def __init__(self, model, optimizer, fwd: forward.Forward, spec: LossSpec, plan: UpdatePlan,
                 work: Batch, grad_clip: float, dp, stats: dict[str, list[float]]):
        self.model, self.optimizer, self.forward, self.spec, self.plan = model, optimizer, fwd, spec, plan
        self.work, self.grad_clip, self.dp, self.stats = work, grad_clip, dp, stats
        self.ref_logp: torch.Tensor | None = None
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
        grad_norm = _step(self.model, self.optimizer, loss, self.grad_clip, self.dp)
        self.stats.setdefault("loss", []).append(float(loss))
        self.stats.setdefault("grad_norm", []).append(grad_norm)

    def _part_loss(self, sub: Batch, mb: Minibatch, part: Part) -> torch.Tensor:
        spec = self.spec
        logp, entropy = self.forward(sub, spec.temperature)
        old = logp.detach() if self.old_logp is None else _pick(self.old_logp, mb.rows, part.rows)
        if self.plan.single_pass:   # weights from this forward's own detached log-probs
            part_weights, capped = _is_weights(spec, old, sub)
            self.seen.append((old, sub, capped))
        else:
            part_weights = None if self.weights is None else _pick(self.weights, mb.rows, part.rows)
        ref = None if self.ref_logp is None else _pick(self.ref_logp, mb.rows, part.rows)
        part_loss, mstats = grpo_loss(
            logp, old, sub.advantages, sub.train_mask(), eps_low=spec.eps_low,
            eps_high=spec.eps_high, dual_clip=spec.dual_clip, ref_logp=ref, beta=spec.beta,
            kl_fn=spec.kl_fn, agg_fn=spec.agg_fn, entropy=entropy,
            entropy_coef=spec.entropy_coef, norm=self.plan.norm, is_weight=part_weights,
            log_ratio_fn=spec.log_ratio_fn, policy_fn=spec.policy_fn,
            keep=_keep(spec, entropy, sub.train_mask()))
        for k, v in mstats.items():
            self.stats.setdefault(k, []).append(float(v))
        return part_loss


def micro_batches(batch: Batch, max_tokens: int) -> list[torch.Tensor | None]:
    """Row index sets of at most `max_tokens` padded tokens each; [None] (the whole batch, no
    split) when `max_tokens` is 0 or the batch fits."""
    width = batch.prompt_ids.shape[1] + batch.completion_ids.shape[1]
    return split_rows(len(batch), width, max_tokens)


def _keep(spec: LossSpec, entropy: torch.Tensor, mask: torch.Tensor) -> torch.Tensor | None:
    """The tokens the surrogate trains when only a top-entropy share does (None: all of them)."""
    if spec.top_entropy_quantile >= 1.0:
        return None
    return high_entropy_mask(entropy, mask, spec.top_entropy_quantile)


def _zero_rows_inert(spec: LossSpec) -> bool:
    """A zero-advantage row changes nothing: no KL or entropy term, and no entropy quantile that
    its tokens would move."""
    return spec.beta == 0 and spec.entropy_coef == 0 and spec.top_entropy_quantile >= 1.0


def _pick(values: torch.Tensor, chunk: torch.Tensor, part: torch.Tensor | None) -> torch.Tensor:
    return values[chunk] if part is None else values[chunk][part]


def _is_weights(spec: LossSpec, old_logp: torch.Tensor, rows: Batch):
    """(importance weights π_old / μ [B, T], capped [B, T]) for `rows`, or (None, None) when the
    correction is off."""
    if spec.is_weights is None:
        return None, None
    return spec.is_weights(old_logp, rows.sampling_logp, rows.train_mask())   # model tokens only


def _mismatch_stats(spec: LossSpec, parts: list, stats: dict[str, list[float]]) -> None:
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
    parts = micro_batches(batch, max_tokens)
    return torch.cat([fwd(batch if rows is None else batch.rows(rows), temperature)[0] for rows in parts])
