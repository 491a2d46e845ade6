"""One decode step of the fused Llama forward: one new token per row against a static KV cache.

Why a step of its own beside `fused_llama.run_layers` (which the update and the prefill use): at
decode shapes (one token, tens of rows) a layer's arithmetic is small and each framework op costs
as much as a row's worth of matmul, so this step does the same computation in fewer ops: the
residual stream is updated in place, rotary embeddings come from a per-step table with the
rotate-half sign folded into sin, keys and values go straight into the cache (converted on the
way), and the attention reads as many cache columns as the caller's mask is wide: in bf16 the
whole cache (a bf16 batched matmul copies an operand whose rows are a slice of a longer buffer,
which cost more than the masked columns' arithmetic), in float32 only the filled columns.

Guaranteed: the computation of `fused_llama.run_layers` (eager attention: scores rounded to the
matrix dtype, a float32 softmax, probabilities rounded back; the trainer's forward) followed by
`fused_llama.logits`, for one token per row, op for op: the same kernels on the same values, so
the same logits bit for bit where the matmul kernels sum in the same order (they did on the CPUs
measured; masked columns add exact zeros). The same inputs give the same bits on the same machine
and thread count.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

# Attend over every cache column (masked beyond the filled ones) rather than a slice: a bf16
# batched matmul copies a sliced operand (twice per layer and step, more than the masked columns'
# arithmetic: 0.36 vs 0.72 ms a layer at 32 rows, 100 of 124 columns); a float32 one does not.
WHOLE_CACHE = {torch.bfloat16: True, torch.float32: False}


def fold_sin(sin: torch.Tensor) -> torch.Tensor:
    """sin with the rotate-half sign folded in: [-sin[:D/2], sin[D/2:]] along the last axis, so
    that x·cos + rotate_half(x)·sin = x·cos + swap_halves(x)·fold_sin(sin) exactly (a negation
    is exact, and the products and the sum are the same floats in the same order)."""
    half = sin.shape[-1] // 2
    return torch.cat([-sin[..., :half], sin[..., half:]], dim=-1)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin_folded: torch.Tensor) -> torch.Tensor:
    """Rotary embedding of x [B, N, D] in float32 (cos, sin_folded [B, 1, D]); float32 out."""
    xf = x.float()
    swapped = xf.roll(xf.shape[-1] // 2, -1)   # [x2, x1]: a copy, then in place
    return xf.mul_(cos).add_(swapped.mul_(sin_folded))   # in fp32, xf is x: a view of this step's qkv


def _norm(w, h: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """`Weights.norm` without its autograd Function (whose forward gives these bits: `fused_ops`),
    a third cheaper per call at decode shapes; sampling never needs its backward."""
    return F.rms_norm(h, h.shape[-1:], weight, w.eps).to(w.dtype)


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """`fused_llama.eager_attention` for one query per row, in place where it can be: q [B, K, G, D]
    (the G query heads of each key/value head), k, v [B, K, S, D], bias [B, 1, 1, S] float32, 0
    where a row may attend and -inf where not (adding it is the masked fill, exactly, at a third
    of its cost); returns [B, K, G, D]."""
    scores = (q @ k.transpose(-1, -2)).float()   # rounded to the matrix dtype first, as in training
    return scores.mul_(q.shape[-1] ** -0.5).add_(bias).softmax(-1).to(v.dtype) @ v


def decode_layers(w, tokens: torch.Tensor, cos: torch.Tensor, sin_folded: torch.Tensor,
                  caches: tuple[list[torch.Tensor], list[torch.Tensor]], start: int,
                  keymask: torch.Tensor) -> torch.Tensor:
    """Last-position logits [B, V] (float32) for one token per row, tokens [B] long, written at
    cache column `start` (every row's next free column; rows are left-padded).

    w: `fused_llama.Weights`. cos, sin_folded: [B, 1, D] at each row's position (`fold_sin`).
    caches: (keys, values), one [B, K, S, D] tensor per layer each. keymask [B, W] bool: the cache
    columns a row may see (True), over the first W > start columns of the cache (S or start + 1:
    the columns attended over)."""
    b, hd, nh, nk = tokens.shape[0], w.head_dim, w.heads, w.kv_heads
    width, qk_width = keymask.shape[-1], (nh + nk) * hd
    bias = torch.zeros(keymask.shape).masked_fill_(~keymask, float("-inf"))[:, None, None]   # float32
    h = F.embedding(tokens, w.embed, w.padding_idx).float()   # [B, d], updated in place below
    for layer, kc, vc in zip(w.layers, *caches):
        qkv = w.linear(_norm(w, h, layer.norm1), layer.wqkv, layer.bqkv)
        qk = _rotate(qkv[:, :qk_width].view(b, nh + nk, hd), cos, sin_folded)
        kc[:, :, start].copy_(qk[:, nh:])                      # float32 -> cache dtype, as `.to`
        vc[:, :, start].copy_(qkv[:, qk_width:].view(b, nk, hd))
        q = qk[:, :nh].to(w.dtype).view(b, nk, nh // nk, hd)
        o = _attend(q, kc[:, :, :width], vc[:, :, :width], bias)
        h.add_(w.linear(o.reshape(b, nh * hd), layer.wo, layer.bo))   # float32 += matrix dtype, exact
        gate, up = w.linear(_norm(w, h, layer.norm2), layer.wgu, layer.bgu).chunk(2, -1)
        h.add_(w.linear(F.silu(gate).mul_(up), layer.wdown, layer.bdown))
    return w.linear(_norm(w, h, w.final_norm), w.lm_head).float()
