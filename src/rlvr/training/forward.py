"""The training forward, (log-probs, entropies) of the completion tokens, with its backend chosen
once per model and device, never per micro-batch.

Three backends, looked up by `backend_name`: `gpu` (`gpu_forward.build`: chunked LM
head, fused decoder stack for Llama-family models) on a GPU; on a CPU `fused` and `model`, chosen
as the CPU engine chooses its sampling backend (`rlvr.models.backends`): fused for the Llama
family (`fused_llama`'s stack: same logits as the model's forward, fewer ops, an attention whose
bf16 backward is fast on CPUs; the LM head and one log-softmax over the real completion tokens
only, `algo.logp_entropy`), the model's own forward under autocast for anything else. A model wrapped for data
parallelism always runs its own forward (`model`), whose hooks sync and gather the weights.

Whether a model is wrapped is read from what it is (a DDP wrapper has `.module`; `fully_shard`
turns the module into an `FSDPModule`), not from the type of its first parameter: after a no-grad
forward FSDP2 leaves the root's parameters unsharded plain tensors, so a parameter test would pick
the fused path over mixed DTensor/Tensor weights. Guaranteed: the choice depends only on the model's
class, its wrapping and the device, so every micro-batch of an update runs the same backend. Not
guaranteed: that a model wrapped after `choose` was called gets the wrapped backend (choose again
after wrapping).
"""

from __future__ import annotations

from typing import Any, Callable

import torch
import torch.nn.functional as F

from rlvr.algo.logp_entropy import logp_entropy
from rlvr.models import backends, fused_llama

# (batch, temperature) -> (log-probs [B, Tc], entropies [B, Tc]); the batch is an `update.Batch`,
# typed Any because update imports this module
Forward = Callable[[Any, float], tuple[torch.Tensor, torch.Tensor]]


def is_wrapped(model) -> bool:
    """DDP (a wrapper with `.module`) or FSDP2 (an `FSDPModule`, or DTensor parameters)."""
    from torch.distributed.tensor import DTensor

    if hasattr(model, "module") or isinstance(model, _fsdp_types()):
        return True
    params = getattr(model, "parameters", None)   # a LoRA reference (AdaptersDisabled) has none
    return callable(params) and isinstance(next(params(), None), DTensor)


def _fsdp_types() -> tuple[type, ...]:
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:   # older torch: only the parameter test in is_wrapped
        return ()
    return (FSDPModule,)


def backend_name(model, compute) -> str:
    """`gpu`, `fused` or `model`: the backend `model` trains through on `compute.device`."""
    if is_wrapped(model):
        return "model"
    if compute.device.is_cuda:
        return "gpu"
    return backends.backend_name(model)


def choose(model, compute, autocast: bool) -> Forward:
    """The training forward of `model` under `compute` (an `update.Compute`) and `autocast`."""
    return _BUILD[backend_name(model, compute)](model, compute, autocast)


def _gpu(model, compute, autocast: bool) -> Forward:
    from rlvr.training.gpu_forward import build
    fwd = build(model, device=compute.device, autocast=autocast, checkpointing=compute.checkpointing,
                vocab_limit=compute.vocab_limit)
    return lambda batch, temperature: fwd(batch.prompt_ids, batch.prompt_mask, batch.completion_ids,
                                          batch.completion_mask, temperature)


def _cpu(kind: type):
    return lambda model, compute, autocast: kind(model, compute.device, autocast).logp_entropy


def _fused(model, compute, autocast: bool) -> Forward:
    """The fused decoder stack over the call's rows without their padding columns, then the LM
    head and one log-softmax over the real completion tokens only (`fused_llama.
    completion_head_inputs`, `algo.logp_entropy`); padding positions of the [B, Tc] results are 0
    (every consumer masks them)."""
    dtype = torch.bfloat16 if autocast else torch.float32

    def fwd(batch, temperature: float) -> tuple[torch.Tensor, torch.Tensor]:
        # this call's own padding columns cut (a micro-batch's rows are often shorter than the
        # batch's longest): positions come from the masks, so the real tokens' values are the same
        cut = batch.trimmed()
        real = cut.completion_mask.bool()
        hidden, head = fused_llama.completion_head_inputs(model, cut.prompt_ids, cut.prompt_mask,
                                                          cut.completion_ids, cut.completion_mask, dtype)
        logp, entropy = logp_entropy(F.linear(hidden, head), cut.completion_ids[real], temperature)
        full = batch.completion_mask.bool()
        zeros = torch.zeros(full.shape, dtype=logp.dtype, device=logp.device)
        return zeros.masked_scatter(full, logp), zeros.masked_scatter(full, entropy)

    return fwd


_BUILD: dict[str, Callable[..., Forward]] = {
    "gpu": _gpu, "fused": _fused, "model": _cpu(backends.ModelBackend)}
