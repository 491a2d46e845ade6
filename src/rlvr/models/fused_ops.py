"""Pieces of the fused Llama stack (`fused_llama`) with their backward written out.

Why: on a CPU the update's time outside the matmuls goes to full-width elementwise passes and the
temporaries they allocate; autograd's chain through an RMSNorm or a rotary embedding makes several
times the passes the gradient needs. Guaranteed: each forward gives the bits of the plain ops it
replaces (`F.rms_norm(h, w).to(dtype)`; `x·cos + rot(x)·sin` in float32, as transformers does);
the rotary (`QKVRotary`) and SwiGLU backwards give autograd's bits too, the RMSNorm backward
autograd's gradient to float rounding. Tested against the plain formulas in tests/unit/test_fused_ops.py.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


class RMSNorm(torch.autograd.Function):
    """`F.rms_norm(h, weight).to(dtype)` with the same ops in the same order (the same bits), the
    cast done by the last multiply, and its backward written out in autograd's order of terms,
    dh = r·g·w + h·(−r³·Σ g·w·h / d), dw = Σ g·h·r (r = 1/√(mean h² + eps)): fewer passes and
    temporaries than autograd's chain through pow, mean, rsqrt and two products."""

    @staticmethod
    def forward(ctx, h, weight, eps: float, dtype: torch.dtype):
        r = torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
        n = h * r
        out = torch.empty(h.shape, dtype=dtype, device=h.device)
        torch.mul(n, weight, out=out)   # computed in float32, rounded once to dtype
        ctx.save_for_backward(h, r, weight)
        return out

    @staticmethod
    def backward(ctx, grad):
        h, r, weight = ctx.saved_tensors
        # one float copy of a bf16 gradient, used twice (a mixed-dtype product would copy it per use)
        g = grad.float()
        gn = g * weight
        # autograd's order: r·gn from the product, then h·(−r³·Σ gn·h / d) from pow → mean → rsqrt
        # (not addcmul: its kernel fuses the multiply-add, other bits)
        dr = (gn * h).sum(-1, keepdim=True) * (-0.5 * r.pow(3)) * (2.0 / h.shape[-1])
        dh = gn.mul_(r).add_(h * dr)   # gn is not needed after dr
        dw = (g * (h * r)).reshape(-1, h.shape[-1]).sum(0) if ctx.needs_input_grad[1] else None
        return dh, dw, None, None


def fold_sin(sin: torch.Tensor) -> torch.Tensor:
    """sin with the rotate-half sign folded in: [-sin[:D/2], sin[D/2:]] along the last axis, so
    that x·cos + rotate_half(x)·sin = x·cos + swap_halves(x)·fold_sin(sin) exactly (a negation
    is exact, and the products and the sum are the same floats in the same order)."""
    half = sin.shape[-1] // 2
    return torch.cat([-sin[..., :half], sin[..., half:]], dim=-1)


def _add_swapped_halves(out: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """out += cat(x₂, x₁) along the last axis (x = [x₁ | x₂]), in place, without making the swap."""
    half = x.shape[-1] // 2
    out[..., :half].add_(x[..., half:])
    out[..., half:].add_(x[..., :half])
    return out


class QKVRotary(torch.autograd.Function):
    """(q [B, H, T, D], k [B, K, T, D], v [B, K, T, D]) of one projection qkv [B, T, (H + 2K)·D]:
    q and k rotated, x·cos + rot(x)·sin in float32 (as transformers does) and returned in qkv's
    dtype, each contiguous, v a contiguous copy (a batched matmul copies an operand whose batch
    axes do not fold into one, as a head slice of qkv's layout; made here once, and the backward
    gets contiguous gradients instead of the matmul backward's copies). The backward writes all
    three gradients straight into one tensor of qkv's layout: the same float32 values as
    autograd through those ops (each gradient element is the same two-term sum; the slices'
    zero-filled gradients only ever add 0), rounded once, without the concatenations of the two
    splits' backwards or the copy that reshapes the heads back.

    rot(x)·sin = [−x₂·s₁, x₁·s₂] (x = [x₁ | x₂], sin = [s₁ | s₂]) is the halves of x·[s₂ | −s₁]
    swapped, and its transpose applied to g is the halves of g·[−s₁ | s₂] swapped: the same
    products (a negation is exact), added half by half in place instead of building rot(x) as
    a negation and a concatenation."""

    @staticmethod
    def forward(ctx, qkv, cos, sin, heads: int, kv_heads: int):
        b, t, width = qkv.shape
        d = width // (heads + 2 * kv_heads)
        half = d // 2
        x = qkv.view(b, t, heads + 2 * kv_heads, d).transpose(1, 2)
        # float32 in a new contiguous [B, H + K, T, D] tensor (float() of a bf16 slice; a copy in
        # float32 too, which the in-place product below needs)
        xf = x[:, :heads + kv_heads].to(torch.float32, memory_format=torch.contiguous_format, copy=True)
        folded = fold_sin(sin)   # [−s₁ | s₂]; its halves swapped are [s₂ | −s₁]
        out = _add_swapped_halves(xf * cos, xf.mul_(folded.roll(half, -1)))
        ctx.save_for_backward(cos, folded)
        ctx.heads, ctx.kv_heads, ctx.qkv_shape = heads, kv_heads, qkv.shape
        q, k = (part.to(qkv.dtype, memory_format=torch.contiguous_format)
                for part in out.split([heads, kv_heads], 1))
        return q, k, x[:, heads + kv_heads:].contiguous()

    @staticmethod
    def backward(ctx, dq, dk, dv):
        cos, sin_folded = ctx.saved_tensors
        heads, kv_heads = ctx.heads, ctx.kv_heads
        b, t, width = ctx.qkv_shape
        out = torch.empty((b, t, heads + 2 * kv_heads, width // (heads + 2 * kv_heads)), dtype=dv.dtype,
                          device=dv.device)
        view = out.transpose(1, 2)
        for grad, part in ((dq, view[:, :heads]), (dk, view[:, heads:heads + kv_heads])):
            g = grad.float()   # once (a mixed-dtype product would copy it per use)
            part.copy_(_add_swapped_halves(g * cos, g * sin_folded))
        view[:, heads + kv_heads:].copy_(dv)
        return out.view(b, t, width), None, None, None, None


class SwiGLU(torch.autograd.Function):
    """silu(gate)·up of gu = [gate | up] (halves of the last dimension), its backward writing both
    halves' gradients straight into one tensor of gu's shape: autograd's products and
    `silu_backward`, in its order, without the concatenation the chunk's backward makes (a full
    pass over the MLP's widest activation per layer)."""

    @staticmethod
    def forward(ctx, gu):
        gate, up = gu.chunk(2, -1)
        act = F.silu(gate)
        ctx.save_for_backward(gate, up, act)
        return act * up

    @staticmethod
    def backward(ctx, grad):
        gate, up, act = ctx.saved_tensors
        out = torch.empty((*gate.shape[:-1], 2 * gate.shape[-1]), dtype=grad.dtype, device=grad.device)
        d_gate, d_up = out.chunk(2, -1)
        torch.mul(grad, act, out=d_up)
        torch.ops.aten.silu_backward.grad_input(grad * up, gate, grad_input=d_gate)
        return out
