"""One decode step of the fused Llama forward: one new token per row against a static KV cache.

Also `Decoder`, the KV cache a batch of rows samples with (its prefill runs `run_layers`).

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

from rlvr.models import fused_llama
from rlvr.models.fused_ops import fold_sin  # noqa: F401 (the decode step's rotary table; callers name it here)

# Attend over every cache column (masked beyond the filled ones) rather than a slice: a bf16
# batched matmul copies a sliced operand (twice per layer and step, more than the masked columns'
# arithmetic: 0.36 vs 0.72 ms a layer at 32 rows, 100 of 124 columns); a float32 one does not.
WHOLE_CACHE = {torch.bfloat16: True, torch.float32: False}


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


# The cache's columns grow this many at a time (`Decoder.reserve`): the bf16 decode step attends
# over every allocated column, and its two batched matmuls cost in proportion to the width
# (≈ 65 µs + 1.4 µs a column each at 128 rows of the tiny model, one thread: 145 µs at 57 columns,
# 94 µs at 25), so a cache as wide as the prompt plus the whole budget read up to twice the
# columns filled. Growing copies the filled columns once per chunk, as a row drop does. (The
# float32 step reads only the filled columns: the engine allocates its cache whole.)
GROW_COLUMNS = 16


class Decoder:
    """Fused weights plus a KV cache for one batch of rows being sampled: allocated to its full
    length, or, with `allocate(..., filled=)`, only as wide as the columns about to be written
    and grown `GROW_COLUMNS` at a time up to that length."""

    def __init__(self, model, dtype: torch.dtype = torch.float32, weights: fused_llama.Weights | None = None):
        self.w = weights if weights is not None else fused_llama.Weights(model, dtype)
        self.k_cache: list[torch.Tensor] = []
        self.v_cache: list[torch.Tensor] = []
        self.length = 0

    def allocate(self, rows: int, length: int, filled: int | None = None) -> None:
        """Columns for `length` positions per row; with `filled`, room for the first `filled` now
        (and one chunk more), the rest as `reserve` asks. Unwritten columns hold zeros (the
        attention masks them; a zero key or value keeps the masked products exact zeros)."""
        self.length = length
        width = length if filled is None else min(length, filled + GROW_COLUMNS)
        shape = (rows, self.w.kv_heads, width, self.w.head_dim)
        self.k_cache = [torch.zeros(shape, dtype=self.w.dtype) for _ in self.w.layers]
        self.v_cache = [torch.zeros(shape, dtype=self.w.dtype) for _ in self.w.layers]

    def reserve(self, end: int) -> None:
        """Columns up to `end` (exclusive) exist: widen the cache by whole chunks if not."""
        width = self.k_cache[0].shape[2] if self.k_cache else 0
        if end <= width:
            return
        if end > self.length:
            raise ValueError(f"cache column {end - 1} is beyond the {self.length} allocated")
        grown = min(self.length, end + GROW_COLUMNS - 1)

        def widen(old: torch.Tensor) -> torch.Tensor:
            new = old.new_empty((*old.shape[:2], grown, old.shape[3]))
            new[:, :, :width].copy_(old)
            new[:, :, width:].zero_()
            return new

        self.k_cache = [widen(k) for k in self.k_cache]
        self.v_cache = [widen(v) for v in self.v_cache]

    def keep_rows(self, index: torch.Tensor) -> None:
        """Drop finished rows from the cache (keeps decode cost proportional to live rows)."""
        self.k_cache = [k.index_select(0, index) for k in self.k_cache]
        self.v_cache = [v.index_select(0, index) for v in self.v_cache]

    def forward(self, ids: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, start: int,
                attn_mask: torch.Tensor, repeat: int = 1) -> torch.Tensor:
        """Last-position logits [B·repeat, V] (float32) for ids [B, T] written at cache[start:].

        cos, sin: [B, 1, T, D] rotary tables at the tokens' positions (see `rope_table`).
        attn_mask [B, 1, T, start + T] bool (True = attend). With repeat > 1 (prefill only,
        start = 0) the keys and values of each row are written to `repeat` consecutive cache rows:
        one prompt is encoded once for its n samples.
        """
        end = start + ids.shape[1]
        self.reserve(end)

        def attend(i, q, k, v):
            self.k_cache[i][:, :, start:end] = k.repeat_interleave(repeat, 0) if repeat > 1 else k
            self.v_cache[i][:, :, start:end] = v.repeat_interleave(repeat, 0) if repeat > 1 else v
            if start > 0:   # decoding: attend over everything cached so far
                k, v = self.k_cache[i][:, :, :end], self.v_cache[i][:, :, :end]
            return fused_llama.eager_attention(q, k, v, attn_mask)

        embedded = F.embedding(ids, self.w.embed, self.w.padding_idx).float()
        h = fused_llama.run_layers(self.w, embedded, cos, sin, attend)
        out = fused_llama.logits(self.w, h[:, -1])   # [B, V]
        return out.repeat_interleave(repeat, 0) if repeat > 1 else out

    def step(self, tokens: torch.Tensor, cos: torch.Tensor, sin_folded: torch.Tensor, start: int,
             keymask: torch.Tensor) -> torch.Tensor:
        """`forward` for one token per row (tokens [B]) at cache column `start`, through the
        decode-only step (`decode_step.decode_layers`: the same logits in fewer ops). cos,
        sin_folded [B, 1, D] (`decode_step.fold_sin`); keymask [B, S] bool over every cache
        column (True = attend; columns not yet written False)."""
        self.reserve(start + 1)
        width = self.k_cache[0].shape[2] if WHOLE_CACHE.get(self.w.dtype, False) else start + 1
        return decode_layers(self.w, tokens, cos, sin_folded, (self.k_cache, self.v_cache), start,
                             keymask[:, :width])
