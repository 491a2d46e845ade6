"""The training forward, (log-probs, entropies) of the completion tokens, with its backend chosen
once per model and device, never per micro-batch.

Three backends, looked up by `backend_name`: `gpu` (`gpu_forward.logp_and_entropy`: chunked LM
head, fused decoder stack for Llama-family models) on a GPU; `fused` (`fused_llama.completion_logits`:
same logits as the model's forward, fewer ops, an attention whose bf16 backward is fast on CPUs) for
Llama-family models on a CPU; `model` (the model's own forward under autocast) for anything else
and for every model wrapped for data parallelism, whose own forward must run (its hooks sync and
gather the weights).

Whether a model is wrapped is read from what it is (a DDP wrapper has `.module`; `fully_shard`
turns the module into an `FSDPModule`), not from the type of its first parameter: after a no-grad
forward FSDP2 leaves the root's parameters unsharded plain tensors, and a per-call parameter test
then picked the fused path with mixed DTensor/Tensor weights. Guaranteed: each backend computes
what the update has always computed on that path, bit for bit. Not guaranteed: that a model
wrapped after `choose` was called gets the wrapped backend (choose again after wrapping).
"""

from __future__ import annotations

from functools import partial
from typing import Callable

import torch

from rlvr.algo.losses import token_entropy
from rlvr.models import fused_llama
from rlvr.models.policy import completion_logits, token_logprobs

# (batch, temperature, autocast) -> (log-probs [B, Tc], entropies [B, Tc]); batch: `update.Batch`
Forward = Callable[[object, float, bool], tuple[torch.Tensor, torch.Tensor]]


def is_wrapped(model) -> bool:
    """DDP (a wrapper with `.module`) or FSDP2 (an `FSDPModule`, or DTensor parameters)."""
    from torch.distributed.tensor import DTensor

    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:   # older torch: only the parameter test below
        FSDPModule = ()
    if hasattr(model, "module") or isinstance(model, FSDPModule):
        return True
    params = getattr(model, "parameters", None)   # a LoRA reference (AdaptersDisabled) has none
    return callable(params) and isinstance(next(params(), None), DTensor)


def backend_name(model, compute) -> str:
    """`gpu`, `fused` or `model`: the backend `model` trains through on `compute.device`."""
    if is_wrapped(model):
        return "model"
    if compute.device.is_cuda:
        return "gpu"
    return "fused" if fused_llama.supports(model) else "model"


def choose(model, compute) -> Forward:
    """The training forward of `model` under `compute` (an `update.Compute`)."""
    return partial(BACKENDS[backend_name(model, compute)], model, compute)


def _tensors(batch):
    return batch.prompt_ids, batch.prompt_mask, batch.completion_ids, batch.completion_mask


def _gpu(model, compute, batch, temperature: float, autocast: bool):
    from rlvr.training.gpu_forward import logp_and_entropy
    return logp_and_entropy(model, *_tensors(batch), temperature=temperature, device=compute.device,
                            autocast=autocast, checkpointing=compute.checkpointing,
                            vocab_limit=compute.vocab_limit)


def _fused(model, compute, batch, temperature: float, autocast: bool):
    dtype = torch.bfloat16 if autocast else torch.float32
    return _from_logits(fused_llama.completion_logits(model, *_tensors(batch), dtype), batch, temperature)


def _model(model, compute, batch, temperature: float, autocast: bool):
    with compute.device.autocast(autocast):
        logits = completion_logits(model, *_tensors(batch))
    return _from_logits(logits, batch, temperature)


def _from_logits(logits: torch.Tensor, batch, temperature: float):
    logits = logits.float()
    if temperature != 1.0:
        logits = logits / temperature
    return token_logprobs(logits, batch.completion_ids), token_entropy(logits)


BACKENDS: dict[str, Callable] = {"gpu": _gpu, "fused": _fused, "model": _model}
