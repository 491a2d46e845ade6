"""A lean batched forward for Llama-family decoders, used by `HFEngine` to sample without overhead.

Why: a tiny model on a CPU spends most of a `model(...)` decode call in framework code (module
dispatch, cache objects, mask building) rather than in arithmetic. This module reads the weights of
a `LlamaForCausalLM` (or `Qwen2ForCausalLM`) once per `generate` call, fuses q/k/v and gate/up into
single matrices, and runs each decode step as a handful of tensor ops over a preallocated KV cache.

Guaranteed: the same computation as the Hugging Face forward (RMSNorm, rotary embeddings from the
model's own `rotary_emb`, grouped-query attention, SwiGLU MLP), so logits agree with it to float
rounding; results depend only on the weights and inputs. In bf16 mode the matrices run in bfloat16
while the residual stream and norms stay in float32, as under `torch.autocast`. Not guaranteed:
bit-equality with transformers' own kernels, or support for anything `supports()` rejects
(sliding windows, q/k norms, rope variants the model's `rotary_emb` does not express, …); the
engine falls back to the model's forward for those.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

_ARCHITECTURES = ("llama", "qwen2")


def supports(model) -> bool:
    """Whether `model` is a plain Llama-family decoder this module reproduces exactly."""
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


def _fused(linears, dtype) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One weight matrix (and bias, if any part has one) for linears applied to the same input."""
    weight = torch.cat([lin.weight.detach() for lin in linears]).to(dtype)
    if all(lin.bias is None for lin in linears):
        return weight, None
    bias = torch.cat([lin.bias.detach() if lin.bias is not None else
                      torch.zeros(lin.out_features) for lin in linears]).to(dtype)
    return weight, bias


class LlamaDecoder:
    """Fused weights plus a static KV cache for one batch of rows."""

    def __init__(self, model, dtype: torch.dtype = torch.float32):
        cfg, inner = model.config, model.model
        self.dtype = dtype
        self.heads = cfg.num_attention_heads
        self.kv_heads = getattr(cfg, "num_key_value_heads", None) or self.heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // self.heads
        self.eps = cfg.rms_norm_eps
        self.rotary = inner.rotary_emb
        self.embed = inner.embed_tokens.weight.detach()
        self.final_norm = inner.norm.weight.detach().float()
        self.lm_head = model.lm_head.weight.detach().to(dtype)
        self.layers = [self._fuse(layer, dtype) for layer in inner.layers]
        self.k_cache: list[torch.Tensor] = []
        self.v_cache: list[torch.Tensor] = []

    @staticmethod
    def _fuse(layer, dtype) -> _Layer:
        a, m = layer.self_attn, layer.mlp
        return _Layer(layer.input_layernorm.weight.detach().float(),
                      *_fused([a.q_proj, a.k_proj, a.v_proj], dtype), *_fused([a.o_proj], dtype),
                      layer.post_attention_layernorm.weight.detach().float(),
                      *_fused([m.gate_proj, m.up_proj], dtype), *_fused([m.down_proj], dtype))

    def rope_table(self, length: int) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin [length, D] for positions 0..length-1, from the model's own rotary module."""
        cos, sin = self.rotary(torch.zeros(1), torch.arange(length)[None])
        return cos[0].float(), sin[0].float()

    def allocate(self, rows: int, length: int) -> None:
        shape = (rows, self.kv_heads, length, self.head_dim)
        self.k_cache = [torch.zeros(shape, dtype=self.dtype) for _ in self.layers]
        self.v_cache = [torch.zeros(shape, dtype=self.dtype) for _ in self.layers]

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
        h = F.embedding(ids, self.embed).float()   # [B, T, d]
        b, t, _ = h.shape
        hd, nh, nk = self.head_dim, self.heads, self.kv_heads
        end = start + t
        for i, layer in enumerate(self.layers):
            x = F.rms_norm(h, h.shape[-1:], layer.norm1, self.eps).to(self.dtype)
            q, k, v = F.linear(x, layer.wqkv, layer.bqkv).split([nh * hd, nk * hd, nk * hd], -1)
            q = _rotate(q.view(b, t, nh, hd).transpose(1, 2), cos, sin)
            k = _rotate(k.view(b, t, nk, hd).transpose(1, 2), cos, sin)
            v = v.view(b, t, nk, hd).transpose(1, 2)
            self.k_cache[i][:, :, start:end] = k.repeat_interleave(repeat, 0) if repeat > 1 else k
            self.v_cache[i][:, :, start:end] = v.repeat_interleave(repeat, 0) if repeat > 1 else v
            if start > 0:   # decoding: attend over everything cached so far
                k, v = self.k_cache[i][:, :, :end], self.v_cache[i][:, :, :end]
            o = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, enable_gqa=nk != nh)
            h = h + F.linear(o.transpose(1, 2).reshape(b, t, nh * hd), layer.wo, layer.bo).float()
            x = F.rms_norm(h, h.shape[-1:], layer.norm2, self.eps).to(self.dtype)
            gate, up = F.linear(x, layer.wgu, layer.bgu).chunk(2, -1)
            h = h + F.linear(F.silu(gate) * up, layer.wdown, layer.bdown).float()
        last = F.rms_norm(h[:, -1], h.shape[-1:], self.final_norm, self.eps).to(self.dtype)
        logits = F.linear(last, self.lm_head).float()   # [B, V]
        return logits.repeat_interleave(repeat, 0) if repeat > 1 else logits


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding in float32 (as transformers does), returned in x's dtype."""
    xf = x.float()
    half = xf.shape[-1] // 2
    rotated = torch.cat([-xf[..., half:], xf[..., :half]], dim=-1)
    return (xf * cos + rotated * sin).to(x.dtype)
