"""A lean forward for Llama-family decoders: fused weights, used for sampling and for the update.

Why: on a CPU, a ~1M-parameter model spends much of a `model(...)` call in framework code (module
dispatch, cache objects, mask building), and under bf16 autocast PyTorch's CPU flash-attention
backward is slower than the rest of the model together. This module reads the weights of a
`LlamaForCausalLM` (or `Qwen2ForCausalLM`) as they are, concatenates q/k/v and gate/up into single
matrices (differentiably: gradients reach the model's own parameters), and runs the model as a
handful of tensor ops: `decode_step.Decoder` with a KV cache for sampling, `completion_logits`
(and `completion_head_inputs`, the LM head's input at the real completion tokens only; the
trainer runs `packed`'s version, which skips padding in every layer) for the
training forward (attention as two matmuls and a float32 softmax, as transformers' eager path;
RMSNorm and rotary with their backward written out, `fused_ops`).

Guaranteed: the same computation as the Hugging Face forward (RMSNorm, rotary embeddings from the
model's own `rotary_emb`, grouped-query attention, SwiGLU MLP, biases where present), so logits
agree with it to float rounding. In bf16 mode the matrices run in bfloat16 while the residual
stream, norms and softmax stay in float32, as under `torch.autocast`. Not guaranteed: bit-equality
with transformers' kernels, or support for anything `supports()` rejects (sliding windows, q/k
norms, tensor-parallel checkpoints, …); callers fall back to the model's forward for those.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from rlvr.models.fused_ops import QKVRotary, RMSNorm, SwiGLU
from rlvr.models.held_weights import HeldWeights

_ARCHITECTURES = ("llama", "qwen2")


def supports(model) -> bool:
    """Whether `model` is a plain Llama-family decoder this module reproduces exactly."""
    if hasattr(model, "peft_config"):   # adapters live outside the weights read here: never ignore them
        return False
    cfg = getattr(model, "config", None)
    inner = getattr(model, "model", None)
    if cfg is None or inner is None or getattr(cfg, "model_type", None) not in _ARCHITECTURES:
        return False
    if getattr(cfg, "hidden_act", "silu") != "silu" or getattr(cfg, "pretraining_tp", 1) != 1:
        return False
    if getattr(cfg, "use_sliding_window", False) or not hasattr(inner, "rotary_emb"):
        return False
    attn = inner.layers[0].self_attn
    return all(hasattr(attn, n) for n in ("q_proj", "k_proj", "v_proj", "o_proj"))


@dataclass
class _Layer:
    norm1: torch.Tensor      # [d] float32
    wqkv: torch.Tensor       # [(H + 2K)·D, d]
    bqkv: torch.Tensor | None
    wo: torch.Tensor         # [d, H·D]
    bo: torch.Tensor | None
    norm2: torch.Tensor      # [d] float32
    wgu: torch.Tensor        # [2F, d]
    bgu: torch.Tensor | None
    wdown: torch.Tensor      # [d, F]
    bdown: torch.Tensor | None


def _fused(linears, dtype, held: HeldWeights | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One weight matrix (and bias, if any part has one) for linears applied to the same input;
    with `held`, its copy cast once for every forward of one minibatch."""
    cat = torch.cat if held is None else held.fuse
    weight = cat([lin.weight for lin in linears]).to(dtype)
    if all(lin.bias is None for lin in linears):
        return weight, None
    bias = cat([lin.bias if lin.bias is not None
                else torch.zeros(lin.out_features, device=lin.weight.device)
                for lin in linears]).to(dtype)
    return weight, bias


class Weights:
    """A model's weights, fused and cast once per call site (differentiable outside no_grad).
    `linear` applies one of its matrices: F.linear, or oneDNN's kernel on prepacked matrices
    after `pack` (sampling only)."""

    def __init__(self, model, dtype: torch.dtype = torch.float32, held: HeldWeights | None = None):
        cfg, inner = model.config, model.model
        self.dtype = dtype
        self.linear: Callable[..., torch.Tensor] = F.linear
        self.heads = cfg.num_attention_heads
        self.kv_heads = getattr(cfg, "num_key_value_heads", None) or self.heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // self.heads
        self.eps = cfg.rms_norm_eps
        self.rotary = inner.rotary_emb
        self.embed = inner.embed_tokens.weight
        # nn.Embedding's padding_idx row gets no gradient in the HF forward; F.embedding needs it named
        self.padding_idx = inner.embed_tokens.padding_idx
        self.final_norm = inner.norm.weight.float()
        head = model.lm_head.weight
        tied = head is self.embed
        self.lm_head = head.to(dtype) if held is None or tied else held.single(head, dtype)
        self.layers = [_Layer(layer.input_layernorm.weight.float(),
                              *_fused([layer.self_attn.q_proj, layer.self_attn.k_proj,
                                       layer.self_attn.v_proj], dtype, held),
                              *_fused([layer.self_attn.o_proj], dtype, held),
                              layer.post_attention_layernorm.weight.float(),
                              *_fused([layer.mlp.gate_proj, layer.mlp.up_proj], dtype, held),
                              *_fused([layer.mlp.down_proj], dtype, held))
                       for layer in inner.layers]

    def pack(self) -> "Weights":
        """Every matrix in oneDNN's blocked layout, done once, where that is available and pays
        (`_packable`). F.linear reorders a bf16 matrix into that layout on every call; at decode
        shapes (32 rows) the reorder is a third of each matmul (1.4-1.9x per matmul measured, the
        same bits out). In float32, oneDNN's kernel on blocked matrices beats the default one
        (MKL) at a real model's widths (1.1-1.7x per matmul on an AVX2 AMD EPYC, the 49k-row
        output layer most) and loses at a tiny model's; its sums round in another order (within
        float32 rounding, not the same bits). Not differentiable: sampling only."""
        if not _packable(self.dtype, self.layers[0].wo if self.layers else self.embed):
            return self
        for layer in self.layers:
            for name in ("wqkv", "wo", "wgu", "wdown"):
                setattr(layer, name, _pack(getattr(layer, name)))
        self.lm_head = _pack(self.lm_head)
        self.linear = _packed_linear
        return self

    def rope_table(self, length: int) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin [length, D] for positions 0..length-1, from the model's own rotary module."""
        with torch.no_grad():
            where = self.embed.device   # the rotary module's buffers live with the weights
            cos, sin = self.rotary(torch.zeros(1, device=where), torch.arange(length, device=where)[None])
        return cos[0].float(), sin[0].float()

    def norm(self, h: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return RMSNorm.apply(h, weight, self.eps, self.dtype)


# float32 matrices are packed when the model's attention matrix (d x H*D: out, or q) has at least
# this many elements: 576 x 576 (SmolLM2-135M) gains 1.2x a matmul, 1024 x 128 (the tiny model's
# largest) loses 3-8 % and its 128 x 128 ones 2.5x (one thread, 32 and 128 rows, AVX2 AMD EPYC)
PACK_FP32_MIN_ELEMENTS = 1 << 18


def _packable(dtype: torch.dtype, like: torch.Tensor) -> bool:
    """Whether the sampling matrices go to oneDNN's blocked layout: bf16 where the CPU computes
    bf16 natively; float32 where `like`, the model's attention-out (or q) matrix, is large enough
    to gain (the k/v matrices of grouped-query attention are smaller; the engine fuses them with q)."""
    from rlvr.models.device import cpu_computes_bf16

    if (like.device.type != "cpu" or not torch.backends.mkldnn.is_available()
            or not hasattr(torch.ops.mkldnn, "_reorder_linear_weight")):
        return False
    if dtype == torch.bfloat16:
        return cpu_computes_bf16()
    return dtype == torch.float32 and like.numel() >= PACK_FP32_MIN_ELEMENTS


def _pack(weight: torch.Tensor) -> torch.Tensor:
    # the batch-size argument only hints the blocking; any row count works with the result
    return torch.ops.mkldnn._reorder_linear_weight(weight.detach(), 32)


def _packed_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")


Attend = Callable[[int, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def run_layers(w: Weights, h: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
               attend: Attend) -> torch.Tensor:
    """The decoder stack on the float32 residual stream h [B, T, d]; returns the new stream.

    cos, sin: [B, 1, T, D] at the tokens' positions. attend(layer, q [B, H, T, D],
    k [B, K, T, D], v [B, K, T, D]) -> [B, H, T, D] does the attention (and any caching).
    """
    b, t, _ = h.shape
    hd, nh, nk = w.head_dim, w.heads, w.kv_heads
    for i, layer in enumerate(w.layers):
        q, k, v = QKVRotary.apply(w.linear(w.norm(h, layer.norm1), layer.wqkv, layer.bqkv), cos, sin, nh, nk)
        o = attend(i, q, k, v)
        # float32 + bf16 adds in float32 (the bf16 operand converted exactly on the fly): the values
        # of `h + x.float()`, and the backward casts the gradient to bf16 once either way
        h = h + w.linear(o.transpose(1, 2).reshape(b, t, nh * hd), layer.wo, layer.bo)
        h = h + w.linear(SwiGLU.apply(w.linear(w.norm(h, layer.norm2), layer.wgu, layer.bgu)),
                         layer.wdown, layer.bdown)
    return h


def logits(w: Weights, h: torch.Tensor) -> torch.Tensor:
    return w.linear(w.norm(h, w.final_norm), w.lm_head).float()


def eager_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                    allowed: torch.Tensor) -> torch.Tensor:
    """softmax(q·kᵀ/√D + mask)·v with a float32 softmax; allowed [B, 1, Tq, Tk] bool, or the same
    mask as `attention_bias` makes it (once per forward, for every layer).

    Grouped-query attention without copying keys and values per query head: the G query heads
    that share a key/value head are stacked along the query axis ([B, K, G·Tq, D]), so each
    product reads the cache once (a per-head copy of the whole cache cost more than the
    attention itself at decode time).
    """
    b, nh, tq, hd = q.shape
    nk = k.shape[1]
    groups = nh // nk
    # scale and mask in place (neither op's backward reads its input or output): the same values
    # as out-of-place ops, two [B, K, G·Tq, Tk] float32 tensors fewer per layer
    scores = (q.reshape(b, nk, groups * tq, hd) @ k.transpose(-1, -2)).float().mul_(hd ** -0.5)
    if allowed.dtype == torch.bool:
        blocked = ~allowed if groups == 1 else ~allowed.repeat(1, 1, groups, 1)   # query g·Tq + t is t's row
        scores.masked_fill_(blocked, float("-inf"))
    else:   # `attention_bias`: the same values, and a backward that is the identity
        scores.add_(allowed)
    return (scores.softmax(-1).to(v.dtype) @ v).view(b, nh, tq, hd)


def attention_bias(allowed: torch.Tensor, groups: int = 1) -> torch.Tensor:
    """`allowed` [B, 1, Tq, Tk] bool as the additive mask `eager_attention` also takes: float32, 0
    where a query may attend and -inf where not, its query axis repeated for the `groups` query
    heads that share a key/value head ([B, 1, G·Tq, Tk]). Adding it gives the masked fill's
    values exactly (s + 0 = s, s + -inf = -inf), and its backward is no pass at all where the
    masked fill's is one over every layer's scores (masked positions' gradients are zero either
    way: their probabilities are 0). Made once per forward, shared by every layer."""
    bias = torch.zeros(allowed.shape, device=allowed.device).masked_fill_(~allowed, float("-inf"))
    return bias if groups == 1 else bias.repeat(1, 1, groups, 1)


def prefix_mask(mask: torch.Tensor) -> torch.Tensor:
    """[B, 1, T, T] causal mask over non-padding keys; a padding query sees itself (no NaN rows)."""
    t = mask.shape[1]
    causal = torch.ones(t, t, dtype=torch.bool).tril()
    return (causal & mask.bool()[:, None, None, :]) | torch.eye(t, dtype=torch.bool)


# Below this prompt width the second pass over the layers costs more framework time than the prompt
# arithmetic it saves (the built-in tiny model's 9-token prompts); SmolLM2's chat prompts are 54-70.
SHARED_PROMPT_MIN_TOKENS = 32


def completion_logits(model, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor,
                      completion_ids: torch.Tensor, completion_mask: torch.Tensor,
                      dtype: torch.dtype = torch.float32, share_prompts: bool = True) -> torch.Tensor:
    """Logits that predict each completion token, [B, Tc, V] float32 (as `policy.completion_logits`).

    With `share_prompts`, rows that share a prompt (a GRPO group's G completions) run that prompt
    once (`_shared_prompt`) when prompts are at least `SHARED_PROMPT_MIN_TOKENS` wide; the logits
    are the same up to float rounding."""
    w = Weights(model, dtype)
    return logits(w, _predicting(w, prompt_ids, prompt_mask, completion_ids, completion_mask, share_prompts))


def completion_head_inputs(model, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor,
                           completion_ids: torch.Tensor, completion_mask: torch.Tensor,
                           dtype: torch.dtype = torch.float32, share_prompts: bool = True,
                           held: HeldWeights | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(hidden [N, d], head [V, d]), both in `dtype`: the LM head's input at the N real completion
    tokens only (`completion_mask`'s ones, row by row), after the final norm, and its weight.
    `hidden @ head.T` are the rows of `completion_logits` at those tokens: padding never reaches
    the head or the softmax over the vocabulary. With `held`, the matrices cast once per minibatch
    (`HeldWeights`)."""
    w = Weights(model, dtype, held)
    h = _predicting(w, prompt_ids, prompt_mask, completion_ids, completion_mask, share_prompts)
    return w.norm(h[completion_mask.bool()], w.final_norm), w.lm_head


def _predicting(w: Weights, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, completion_ids: torch.Tensor,
                completion_mask: torch.Tensor, share_prompts: bool) -> torch.Tensor:
    """The float32 residual stream [B, Tc, d] at the positions that predict each completion token."""
    if share_prompts and prompt_ids.shape[1] >= SHARED_PROMPT_MIN_TOKENS:
        prompts, masks, inverse = _distinct_prompts(prompt_ids, prompt_mask)
        if prompts.shape[0] < prompt_ids.shape[0]:
            return _shared_prompt(w, prompts, masks, inverse, completion_ids, completion_mask)
    ids = torch.cat([prompt_ids, completion_ids], dim=1)
    mask = torch.cat([prompt_mask, completion_mask], dim=1)
    pos = (mask.cumsum(-1) - 1).clamp_(min=0)
    cos, sin = w.rope_table(int(pos.max()) + 1)
    bias = attention_bias(prefix_mask(mask), w.heads // w.kv_heads)
    h = run_layers(w, F.embedding(ids, w.embed, w.padding_idx).float(), cos[pos][:, None], sin[pos][:, None],
                   lambda _, q, k, v: eager_attention(q, k, v, bias))
    tc = completion_ids.shape[1]
    return h[:, -tc - 1:-1]


def _distinct_prompts(prompt_ids: torch.Tensor, prompt_mask: torch.Tensor):
    """(distinct prompts [U, Tp], their masks [U, Tp], each row's index among them [B])."""
    tp = prompt_ids.shape[1]
    distinct, inverse = torch.unique(torch.cat([prompt_ids, prompt_mask.to(prompt_ids.dtype)], 1), dim=0,
                                     return_inverse=True)
    return distinct[:, :tp], distinct[:, tp:].to(prompt_mask.dtype), inverse


@dataclass
class _Prompts:
    """The shared-prompt pass (`_prompt_pass`): what a completion pass over the same rows needs."""

    last: torch.Tensor         # [B, d] float32: each row's prompt's last position (predicts token 0)
    keys: list[tuple[torch.Tensor, torch.Tensor]]   # per layer, each distinct prompt's keys and values
    inverse: torch.Tensor      # [B] long: each row's distinct prompt
    embedded: torch.Tensor     # [n, d] float32: the completion tokens handed in, embedded
    cos: torch.Tensor          # [S, D] rotary tables covering prompt and completion positions
    sin: torch.Tensor
    positions: torch.Tensor    # [B, Tc] long: each completion column's position
    bias: torch.Tensor         # the completion queries' `attention_bias` over prompt + completion keys

    def row_keys(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The rows' prompt keys and values [B, K, Tp, D] at `layer`, gathered when asked for."""
        k, v = self.keys[layer]
        return k[self.inverse], v[self.inverse]


def _prompt_pass(w: "Weights", prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, inverse: torch.Tensor,
                 completion_mask: torch.Tensor, completion_tokens: torch.Tensor) -> _Prompts:
    """Each distinct prompt [U, Tp] through the stack once, and `completion_tokens` (the
    completions' ids, padded [B·Tc] or real ones only) embedded in the same lookup: its backward
    builds one dense [V, d] gradient, not two."""
    p_pos = (prompt_mask.cumsum(-1) - 1).clamp_(min=0)
    c_pos = (prompt_mask.sum(-1, keepdim=True)[inverse] + completion_mask.cumsum(-1) - 1).clamp_(min=0)
    cos, sin = w.rope_table(int(max(p_pos.max(), c_pos.max())) + 1)
    keys: list[tuple[torch.Tensor, torch.Tensor]] = []
    groups = w.heads // w.kv_heads
    p_bias = attention_bias(prefix_mask(prompt_mask), groups)

    def attend_prompt(_, q, k, v):
        keys.append((k, v))
        return eager_attention(q, k, v, p_bias)

    e_p, e_c = F.embedding(torch.cat([prompt_ids.flatten(), completion_tokens]), w.embed,
                           w.padding_idx).float().split([prompt_ids.numel(), completion_tokens.numel()])
    h_p = run_layers(w, e_p.view(*prompt_ids.shape, -1), cos[p_pos][:, None], sin[p_pos][:, None],
                     attend_prompt)
    b, tc = completion_mask.shape
    seen = prompt_mask.bool()[inverse][:, None, None, :].expand(b, 1, tc, prompt_mask.shape[1])
    c_bias = attention_bias(torch.cat([seen, prefix_mask(completion_mask)], dim=-1), groups)
    return _Prompts(h_p[inverse, -1], keys, inverse, e_c, cos, sin, c_pos, c_bias)


def _shared_prompt(w: "Weights", prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, inverse: torch.Tensor,
                   completion_ids: torch.Tensor, completion_mask: torch.Tensor) -> torch.Tensor:
    """`_predicting` with each distinct prompt [U, Tp] run once: its keys and values (and the
    hidden state that predicts the first completion token) are gathered for the rows `inverse`
    names. Exact, not an approximation: a prompt position never attends to a completion, so its
    activations are the same in every row, and autograd sums each row's gradient through the
    gather. The prompts' share of the update's arithmetic drops by the rows per prompt (G)."""
    p = _prompt_pass(w, prompt_ids, prompt_mask, inverse, completion_mask, completion_ids.flatten())
    b, tc = completion_ids.shape

    def attend_completion(i, q, k, v):
        pk, pv = p.row_keys(i)
        return eager_attention(q, torch.cat([pk, k], 2), torch.cat([pv, v], 2), p.bias)

    h_c = run_layers(w, p.embedded.view(b, tc, -1), p.cos[p.positions][:, None], p.sin[p.positions][:, None],
                     attend_completion)
    return torch.cat([p.last[:, None], h_c[:, :-1]], dim=1)


class WeightCache:
    """Fused weights for sampling, rebuilt only when a parameter has changed since the last call.

    Fusing and casting copies every weight (on a 135M model, a third of a 64-token decode at 32
    rows). A parameter changes in place (optimizer steps, `load_state_dict`) or is replaced
    (`.data = ...`); the key, each parameter's version counter and storage address, sees both.
    A fused optimizer kernel (`AdamW(fused=True)`) writes without bumping the version counter, so
    whoever updates the weights also calls `invalidate` (the engine does, in `load_weights`)."""

    def __init__(self, model, dtype: torch.dtype = torch.float32):
        self.model, self.dtype = model, dtype
        self._key: tuple = ()
        self._weights: Weights | None = None

    def invalidate(self) -> None:
        self._weights = None

    def get(self) -> Weights:
        key = tuple((p._version, p.data_ptr()) for p in self.model.parameters())
        if self._weights is None or key != self._key:
            with torch.no_grad():
                self._weights = Weights(self.model, self.dtype).pack()
            self._key = key
        return self._weights
