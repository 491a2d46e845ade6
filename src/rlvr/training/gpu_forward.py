"""The training forward on a GPU: hidden states, then chunked log-probs and entropies.

The `gpu` backend of `rlvr.training.forward` (chosen when the run's device is a GPU).
Llama/Qwen2 policies (`fused_llama.supports`) run the fused decoder stack with PyTorch's
scaled-dot-product attention (memory-efficient kernels instead of an explicit [B, H, T, T]
score tensor per layer); other models run their own decoder (`get_decoder()`) under autocast.
Either way the LM head goes through `chunked.logprob_entropy`, so the [B, T, V] logits are never
materialised for the whole micro-batch. With `checkpointing` each fused layer is recomputed in
the backward pass (HF models use their own `gradient_checkpointing_enable`). `build` picks the
variant (`variant`: fused, the model's decoder, or its full-logit forward) once per model.

Guaranteed: the same log-probs as the CPU path up to bf16/fp32 rounding (fused path: the same
weights, norms, rotary tables and GQA; a padding query attends to itself only, as there). Not
guaranteed: models whose head scales or soft-caps logits (e.g. Gemma 2's final soft-capping), and
LoRA's adapters-disabled reference (a callable without `config`), are sent through their own
full-logit forward, without the chunking.
"""

from __future__ import annotations

import copy
from functools import partial

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from rlvr.models import fused_llama
from rlvr.training.chunked import logprob_entropy


# `grpo.micro_batch_tokens: 0` on a GPU: a budget from the device's total memory less an estimate
# of the training state (not the free memory at the start: a resumed run, and every rank, must get
# the same budget, or the micro-batch sums change and resume is no longer exact).
# Training state per parameter: float32 weight, gradient and two AdamW moments, a bf16 copy (18 B).
# Activations autograd keeps per token and layer on the fused path (bf16 matrices, float32
# residual stream), counted from the tensors `fused_llama.run_layers` saves: about 34·d + 8·m + 12·kv
# bytes; rounded up to 40·d + 8·m. With per-layer checkpointing: the float32 layer input (4·d) per
# layer plus one layer recomputed. Half of what is left goes to activations; the other half covers
# the reference model, the decode's KV cache, the chunked LM head and fragmentation. An estimate,
# not a measurement (on a GPU, bench/gpu_micro.py prints the peak memory it gives).
MICRO_BATCH_MEMORY_SHARE = 0.5
MICRO_BATCH_STATE_BYTES_PER_PARAM = 18
MICRO_BATCH_MIN_TOKENS = 1024
MICRO_BATCH_FALLBACK_TOKENS = 16384     # a model without a readable shape (no `config`)


def micro_batch_budget(memory_bytes: int, hidden: int, intermediate: int, layers: int,
                       checkpointing: bool = False) -> int:
    """Padded tokens per forward/backward whose activations fit `MICRO_BATCH_MEMORY_SHARE` of
    `memory_bytes`, a multiple of 1024, at least `MICRO_BATCH_MIN_TOKENS`."""
    per_layer = 40 * hidden + 8 * intermediate
    per_token = 4 * hidden * layers + per_layer if checkpointing else per_layer * layers
    tokens = int(MICRO_BATCH_MEMORY_SHARE * memory_bytes) // per_token
    return max(MICRO_BATCH_MIN_TOKENS, tokens // 1024 * 1024)


def micro_batch_tokens(requested: int, model, device, checkpointing: bool,
                       total_bytes: int | None = None) -> int:
    """`requested` when set (> 0) or on a CPU (0: the whole minibatch, as always); on a GPU, 0
    means `micro_batch_budget` of the device's total memory (`total_bytes`: read when None) less
    the model's training state."""
    if requested > 0 or not device.is_cuda:
        return requested
    inner = getattr(model, "module", model)
    cfg = getattr(inner, "config", None)
    hidden, inter, layers = (getattr(cfg, k, None) for k in ("hidden_size", "intermediate_size",
                                                                "num_hidden_layers"))
    if not (isinstance(hidden, int) and isinstance(inter, int) and isinstance(layers, int)):
        return MICRO_BATCH_FALLBACK_TOKENS
    if total_bytes is None:
        total_bytes = torch.cuda.get_device_properties(device.torch).total_memory
    state = MICRO_BATCH_STATE_BYTES_PER_PARAM * sum(p.numel() for p in inner.parameters())
    return micro_batch_budget(max(0, total_bytes - state), hidden, inter, layers, checkpointing)


def sdpa_attention(q, k, v, allowed):
    """softmax(q·kᵀ/√D + mask)·v through PyTorch's fused kernels; allowed [B, 1, Tq, Tk] bool."""
    if k.shape[1] != q.shape[1]:
        k = k.repeat_interleave(q.shape[1] // k.shape[1], 1)
        v = v.repeat_interleave(q.shape[1] // v.shape[1], 1)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)


def _fused_hidden(model, ids, mask, dtype, checkpointing: bool):
    w = fused_llama.Weights(model, dtype)
    pos = (mask.cumsum(-1) - 1).clamp_(min=0)
    cos, sin = w.rope_table(int(pos.max()) + 1)
    cos, sin = cos[pos][:, None], sin[pos][:, None]
    allowed = fused_llama.prefix_mask(mask.cpu()).to(ids.device)
    h = F.embedding(ids, w.embed, w.padding_idx).float()
    attend = lambda _, q, k, v: sdpa_attention(q, k, v, allowed)  # noqa: E731
    if not checkpointing:
        h = fused_llama.run_layers(w, h, cos, sin, attend)
    else:
        for layer in w.layers:       # one layer per checkpoint: keeps one layer's activations
            one = copy.copy(w)
            one.layers = [layer]
            h = checkpoint(fused_llama.run_layers, one, h, cos, sin, attend, use_reentrant=False)
    return w.norm(h, w.final_norm), w.lm_head


def _plain_hidden(model, ids, mask, device, autocast: bool):
    pos = (mask.cumsum(-1) - 1).clamp_(min=0)
    with device.autocast(autocast):
        out = model.get_decoder()(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=False)
    h = out.last_hidden_state
    return h, model.get_output_embeddings().weight.to(h.dtype)


def _scales_logits(model) -> bool:
    cfg = getattr(model, "config", None)
    return bool(getattr(cfg, "final_logit_softcapping", None) or getattr(cfg, "logit_scale", None)
                or getattr(cfg, "logits_scaling", None))


def variant(model) -> str:
    """`full` (own full-logit forward: the head scales or soft-caps, or `model` is a callable
    stand-in with no `config`, such as LoRA's adapters-disabled KL reference, whose call is all
    there is), `fused` (Llama family) or `decoder` (the model's own decoder, then the chunked head)."""
    if not hasattr(model, "config") or _scales_logits(model):
        return "full"
    return "fused" if fused_llama.supports(model) else "decoder"


def build(model, *, device, autocast: bool, checkpointing: bool = False,
          vocab_limit: int | None = None, chunk_rows: int = 2048):
    """f(prompt_ids, prompt_mask, completion_ids, completion_mask, temperature) -> (log-probs
    [B, Tc], entropies [B, Tc]) float32, with the variant chosen here, once."""
    kind = variant(model)
    if kind == "full":
        return partial(_full_logits, model, device, autocast)
    if kind == "fused":
        hidden = partial(_fused_hidden, model, dtype=torch.bfloat16 if autocast else torch.float32,
                         checkpointing=checkpointing)
    else:
        hidden = partial(_plain_hidden, model, device=device, autocast=autocast)
    return partial(_chunked, hidden, device, vocab_limit, chunk_rows)


def _full_logits(model, device, autocast: bool, prompt_ids, prompt_mask, completion_ids,
                 completion_mask, temperature: float):
    from rlvr.models.policy import completion_logits, token_logprobs
    from rlvr.algo.losses import token_entropy
    with device.autocast(autocast):
        logits = completion_logits(model, prompt_ids, prompt_mask, completion_ids, completion_mask)
    logits = logits.float() / temperature
    return token_logprobs(logits, completion_ids), token_entropy(logits)


def _chunked(hidden, device, vocab_limit: int | None, chunk_rows: int, prompt_ids, prompt_mask,
             completion_ids, completion_mask, temperature: float):
    ids = torch.cat([prompt_ids, completion_ids], dim=1)
    mask = torch.cat([prompt_mask, completion_mask], dim=1)
    tc = completion_ids.shape[1]
    h, head = hidden(ids, mask)
    h = h[:, -tc - 1:-1]                                           # [B, Tc, d]
    b = h.shape[0]
    with device.autocast(False):
        logp, ent = logprob_entropy(h.reshape(b * tc, -1), head, completion_ids.reshape(-1),
                                    temperature, chunk_rows, vocab_limit)
    return logp.view(b, tc), ent.view(b, tc)
