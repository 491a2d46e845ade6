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
# of the training state and of what a colocated engine holds (not the free memory at the start: a
# resumed run, and every rank, must get the same budget, or the micro-batch sums change and resume
# is no longer exact). Training state per parameter: float32 weight, gradient and two AdamW
# moments, a bf16 copy (18 B); DDP adds its float32 gradient buckets (4 B); FSDP2 holds 1/world of
# that, plus the unsharded float32 weights outside the decoder layers (embeddings, head) and two
# layers' gathered weights (one computing, one prefetched).
# Activations autograd keeps per token and layer (`ACTIVATION_BYTES`, from the forward actually
# taken): the fused path (bf16 matrices, float32 residual stream), counted from the tensors
# `fused_llama.run_layers` saves, about 34·d + 8·m + 12·kv bytes, rounded up to 40·d + 8·m; a
# model's own decoder layers under autocast (wrapped models, other families), counted with
# saved-tensor hooks on Qwen2 layers at the 0.5B and 1.5B widths on a CPU
# (tests/unit/test_gpu_memory.py): about 34·d + 8.3·m, rounded up to 40·d + 10·m. The `full`
# variant also keeps the [T, V] logits: counted 8.5·V on a CPU; 18·V allows a bf16 product, its
# float32 copy, the scaled copy, log-softmax and softmax all kept.
# With per-layer checkpointing: the layer input (4·d) per layer plus one layer recomputed. Half of
# what is left goes to activations; the other half covers the reference model, the chunked LM head
# (chunk rows × V float32, a few copies), the decode's KV cache and fragmentation. An estimate,
# not a measurement (on a GPU, bench/gpu_check.sh prints the peak memory it gives).
MICRO_BATCH_MEMORY_SHARE = 0.5
MICRO_BATCH_STATE_BYTES_PER_PARAM = 18
DDP_BUCKET_BYTES_PER_PARAM = 4
MICRO_BATCH_MIN_TOKENS = 1024
MICRO_BATCH_FALLBACK_TOKENS = 16384     # a model without a readable shape (no `config`)
# bytes a token keeps per layer, as (a, b) in a·d + b·m, by `variant`
ACTIVATION_BYTES = {"fused": (40, 8), "decoder": (40, 10), "wrapped": (40, 10), "full": (40, 10)}
FULL_LOGIT_BYTES_PER_VOCAB = 18


def micro_batch_budget(memory_bytes: int, hidden: int, intermediate: int, layers: int,
                       checkpointing: bool = False, kind: str = "fused", vocab: int = 0) -> int:
    """Padded tokens per forward/backward whose activations (`token_bytes`) fit
    `MICRO_BATCH_MEMORY_SHARE` of `memory_bytes`, a multiple of 1024, at least
    `MICRO_BATCH_MIN_TOKENS`."""
    per_token = token_bytes(hidden, intermediate, layers, checkpointing, kind, vocab)
    tokens = int(MICRO_BATCH_MEMORY_SHARE * memory_bytes) // per_token
    return max(MICRO_BATCH_MIN_TOKENS, tokens // 1024 * 1024)


def token_bytes(hidden: int, intermediate: int, layers: int, checkpointing: bool = False,
                kind: str = "fused", vocab: int = 0) -> int:
    """Bytes autograd keeps per token of a micro-batch on the `kind` variant (`ACTIVATION_BYTES`)."""
    a, b = ACTIVATION_BYTES[kind]
    per_layer = a * hidden + b * intermediate
    per_token = 4 * hidden * layers + per_layer if checkpointing else per_layer * layers
    return per_token + (FULL_LOGIT_BYTES_PER_VOCAB * vocab if kind == "full" else 0)


def state_bytes(params: int, mode: str = "", world: int = 1, outside_layers: int = 0,
                layer: int = 0) -> int:
    """The training state's bytes on one device: `mode` "" (one process), "ddp" or "fsdp2"
    (sharded over `world`, plus `outside_layers` and two layers' gathered float32 weights)."""
    if mode == "fsdp2":
        return MICRO_BATCH_STATE_BYTES_PER_PARAM * params // world + 4 * (outside_layers + 2 * layer)
    extra = DDP_BUCKET_BYTES_PER_PARAM if mode == "ddp" else 0
    return (MICRO_BATCH_STATE_BYTES_PER_PARAM + extra) * params


def micro_batch_tokens(requested: int, model, device, checkpointing: bool,
                       total_bytes: int | None = None, engine_share: float = 0.0) -> int:
    """`requested` when set (> 0) or on a CPU (0: the whole minibatch, as always); on a GPU, 0
    means `micro_batch_budget` of the device's total memory (`total_bytes`: read when None) less
    `engine_share` of it (a colocated engine's) and the model's training state, for the forward
    `model` trains through (`variant`; wrapped by DDP or FSDP2 or not)."""
    if requested > 0 or not device.is_cuda:
        return requested
    inner, mode = _unwrapped(model)
    cfg = getattr(inner, "config", None)
    hidden, inter, layers = (getattr(cfg, k, None) for k in ("hidden_size", "intermediate_size",
                                                                "num_hidden_layers"))
    if not (isinstance(hidden, int) and isinstance(inter, int) and isinstance(layers, int)):
        return MICRO_BATCH_FALLBACK_TOKENS
    if total_bytes is None:
        total_bytes = torch.cuda.get_device_properties(device.torch).total_memory
    params, outside, layer = _param_counts(inner)
    state = state_bytes(params, mode, _world() if mode else 1, outside, layer)
    free = total_bytes - int(engine_share * total_bytes) - state
    return micro_batch_budget(max(0, free), hidden, inter, layers, checkpointing,
                              variant(model, wrapped=bool(mode)), int(getattr(cfg, "vocab_size", 0)))


def _unwrapped(model) -> tuple[object, str]:
    """(the module with the config, "ddp" | "fsdp2" | "") without importing `training.forward`."""
    if hasattr(model, "module"):
        return model.module, "ddp"
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:
        return model, ""
    return model, "fsdp2" if isinstance(model, FSDPModule) else ""


def _param_counts(model) -> tuple[int, int, int]:
    """(all parameters, those outside the decoder layers, the largest layer's), as global counts
    (a DTensor's `numel` is its full size)."""
    total = sum(p.numel() for p in model.parameters())
    layers = getattr(getattr(model, "model", None), "layers", None) or []
    sizes = [sum(p.numel() for p in layer.parameters()) for layer in layers]
    return total, total - sum(sizes), max(sizes, default=0)


def _world() -> int:
    import torch.distributed as dist

    return dist.get_world_size() if dist.is_initialized() else 1


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
    return _head_inputs(out.last_hidden_state, model.get_output_embeddings().weight, autocast)


def _wrapped_hidden(model, ids, mask, device, autocast: bool):
    """The final hidden states through the wrapper's own call (DDP's gradient hooks, FSDP2's
    all-gathers), with the model's head on the last position only (`logits_to_keep=1`), then the
    head weight: FSDP2 leaves the root's parameters (embeddings, head) gathered after the forward
    and reduce-scatters their gradients when the whole backward ends."""
    inner = getattr(model, "module", model)
    pos = (mask.cumsum(-1) - 1).clamp_(min=0)
    with device.autocast(autocast):
        out = model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=False,
                    logits_to_keep=1, output_hidden_states=True)
    return _head_inputs(out.hidden_states[-1], inner.get_output_embeddings().weight, autocast)


def _head_inputs(h, weight, autocast: bool):
    """(hidden, head weight) in the autocast dtype (bf16) when on, as the model's own head would
    compute under autocast (a float32 residual stream would otherwise make the head an fp32
    GEMM); else the hidden states' dtype."""
    dtype = torch.bfloat16 if autocast else h.dtype
    return h.to(dtype), weight.to(dtype)


def _scales_logits(model) -> bool:
    cfg = getattr(model, "config", None)
    return bool(getattr(cfg, "final_logit_softcapping", None) or getattr(cfg, "logit_scale", None)
                or getattr(cfg, "logits_scaling", None))


def variant(model, wrapped: bool = False) -> str:
    """`full` (own full-logit forward: the head scales or soft-caps, or `model` is a callable
    stand-in with no `config`, such as LoRA's adapters-disabled KL reference, whose call is all
    there is), `wrapped` (DDP/FSDP2: the wrapper's own forward, then the chunked head), `fused`
    (Llama family) or `decoder` (the model's own decoder, then the chunked head)."""
    inner = getattr(model, "module", model) if wrapped else model
    if not hasattr(inner, "config") or _scales_logits(inner):
        return "full"
    if wrapped:
        return "wrapped"
    return "fused" if fused_llama.supports(model) else "decoder"


def build(model, *, device, autocast: bool, checkpointing: bool = False,
          vocab_limit: int | None = None, chunk_rows: int = 2048, wrapped: bool = False):
    """f(prompt_ids, prompt_mask, completion_ids, completion_mask, temperature) -> (log-probs
    [B, Tc], entropies [B, Tc]) float32, with the variant chosen here, once (`wrapped`: `model`
    is wrapped for data parallelism)."""
    kind = variant(model, wrapped)
    if kind == "full":
        return partial(_full_logits, model, device, autocast)
    if kind == "fused":
        hidden = partial(_fused_hidden, model, dtype=torch.bfloat16 if autocast else torch.float32,
                         checkpointing=checkpointing)
    else:
        make = _wrapped_hidden if kind == "wrapped" else _plain_hidden
        hidden = partial(make, model, device=device, autocast=autocast)
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
