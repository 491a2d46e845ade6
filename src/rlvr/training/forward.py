"""The training forward, (log-probs, entropies) of the completion tokens, with its backend chosen
once per model and device, never per micro-batch.

Three backends, looked up by `backend_name`: `gpu` (`gpu_forward.build`: chunked LM
head, fused decoder stack for Llama-family models) on a GPU; on a CPU the `fused` and `model`
backends of `rlvr.models.backends` (the same two the CPU engine samples through): fused for the
Llama family (same logits as the model's forward, fewer ops, an attention whose bf16 backward is
fast on CPUs, the LM head and one log-softmax over the real completion tokens only), the model's
own forward under autocast for anything else. A model wrapped for data parallelism runs its own
forward, whose hooks sync and gather the weights: on a CPU the whole of it (`model`); on a GPU up
to the final hidden states, then the chunked head (`gpu_forward`'s `wrapped` variant), so the
[B, T, V] logits the GPU budget does not count are never made.

Whether a model is wrapped is read from what it is (a DDP wrapper has `.module`; `fully_shard`
turns the module into an `FSDPModule`), not from the type of its first parameter: after a no-grad
forward FSDP2 leaves the root's parameters unsharded plain tensors, so a parameter test would pick
the fused path over mixed DTensor/Tensor weights. Guaranteed: the choice depends only on the model's
class, its wrapping and the device, so every micro-batch of an update runs the same backend. Not
guaranteed: that a model wrapped after `choose` was called gets the wrapped backend (choose again
after wrapping).
"""

from __future__ import annotations

import contextlib
from typing import Callable

import torch

from rlvr.models import backends
from rlvr.models.batch import Batch

# (batch, temperature) -> (log-probs [B, Tc], entropies [B, Tc])
Forward = Callable[[Batch, float], tuple[torch.Tensor, torch.Tensor]]


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
    if compute.device.is_cuda:
        return "gpu"
    if is_wrapped(model):
        return "model"
    return backends.backend_name(model)


def choose(model, compute, autocast: bool) -> Forward:
    """The training forward of `model` under `compute` (an `update.Compute`) and `autocast`."""
    return _BUILD[backend_name(model, compute)](model, compute, autocast)


def minibatch(fwd: Forward, parts: int):
    """The context one minibatch's `parts` micro-batch forwards and backwards run in: on the fused
    CPU backend with more than one part, the weights cast once for all of them
    (`FusedBackend.minibatch`; gradients complete when it ends, the same bits); elsewhere nothing."""
    hold = getattr(getattr(fwd, "__self__", None), "minibatch", None)
    return hold() if hold is not None and parts > 1 else contextlib.nullcontext()


def _gpu(model, compute, autocast: bool) -> Forward:
    from rlvr.training.gpu_forward import build
    fwd = build(model, device=compute.device, autocast=autocast, checkpointing=compute.checkpointing,
                vocab_limit=compute.vocab_limit, wrapped=is_wrapped(model))
    return lambda batch, temperature: fwd(batch.prompt_ids, batch.prompt_mask, batch.completion_ids,
                                          batch.completion_mask, temperature)


def _cpu(kind: type):
    return lambda model, compute, autocast: kind(model, compute.device, autocast).logp_entropy


_BUILD: dict[str, Callable[..., Forward]] = {
    "gpu": _gpu, "fused": _cpu(backends.FusedBackend), "model": _cpu(backends.ModelBackend)}
