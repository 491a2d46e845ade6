"""The fused stack's rotary embedding of q and k (a hand-written backward), its SwiGLU, and attention (scale and mask in
place) give bit for bit the values and gradients of the plain out-of-place formulas, in float32
and with bf16 inputs, for grouped-query and plain attention; its RMSNorm the bits of `F.rms_norm`
and autograd's gradients to float rounding."""

import types

import pytest
import torch
import torch.nn.functional as F

from rlvr.models import fused_llama

torch.set_num_threads(1)


def _plain_rotate(x, cos, sin):
    xf = x.float()
    half = xf.shape[-1] // 2
    return (xf * cos + torch.cat([-xf[..., half:], xf[..., :half]], dim=-1) * sin).to(x.dtype)


def _plain_attention(q, k, v, allowed):
    b, nh, tq, hd = q.shape
    nk, tk = k.shape[1], k.shape[2]
    groups = nh // nk
    scores = (q.reshape(b, nk, groups * tq, hd) @ k.transpose(-1, -2)).float() * hd ** -0.5
    scores = scores.view(b, nk, groups, tq, tk).masked_fill(~allowed[:, :, None], float("-inf"))
    probs = scores.softmax(-1).view(b, nk, groups * tq, tk)
    return (probs.to(v.dtype) @ v).view(b, nh, tq, hd)


def _value_and_grads(fn, inputs, n_grad):
    leaves = [x.clone().requires_grad_() if i < n_grad else x for i, x in enumerate(inputs)]
    out = fn(*leaves)
    weight = torch.linspace(-2, 3, out.numel()).view(out.shape)
    (out.float() * weight).sum().backward()
    return [out.detach()] + [x.grad for x in leaves[:n_grad]]


def _plain_qkv_rotary(qkv, cos, sin, nh, nk):
    b, t, _ = qkv.shape
    hd = qkv.shape[-1] // (nh + 2 * nk)
    qk, v = qkv.split([(nh + nk) * hd, nk * hd], -1)
    q, k = _plain_rotate(qk.view(b, t, nh + nk, hd).transpose(1, 2), cos, sin).split([nh, nk], 1)
    return q, k, v.view(b, t, nk, hd).transpose(1, 2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("heads", [(6, 2), (4, 4)])
def test_qkv_rotary_is_bit_identical_to_the_plain_formula(dtype, heads):
    from rlvr.models.fused_ops import QKVRotary

    g = torch.Generator().manual_seed(0)
    (nh, nk), b, t, hd = heads, 3, 5, 8
    qkv = torch.randn(b, t, (nh + 2 * nk) * hd, generator=g).to(dtype)
    cos, sin = torch.randn(b, 1, t, hd, generator=g), torch.randn(b, 1, t, hd, generator=g)
    results = []
    for fn in (QKVRotary.apply, _plain_qkv_rotary):
        x = qkv.clone().requires_grad_()
        outs = fn(x, cos, sin, nh, nk)
        weights = [torch.linspace(-2, 3 + i, o.numel()).view(o.shape) for i, o in enumerate(outs)]
        sum((o.float() * wt).sum() for o, wt in zip(outs, weights)).backward()
        results.append([o.detach() for o in outs] + [x.grad])
    assert all(r.dtype == dtype for r in results[0])
    assert all(torch.equal(a, b) for a, b in zip(*results))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("heads", [(6, 2), (4, 4)])
@pytest.mark.parametrize("mask", ["bool", "bias"])
def test_attention_is_bit_identical_to_the_plain_formula(dtype, heads, mask):
    """With the mask as booleans (masked fill) or as `attention_bias` (added): the same bits."""
    g = torch.Generator().manual_seed(1)
    (nh, nk), b, tq, tk, hd = heads, 2, 5, 7, 16
    q, k, v = (torch.randn(b, n, t, hd, generator=g).to(dtype) for n, t in ((nh, tq), (nk, tk), (nk, tk)))
    allowed = torch.rand(b, 1, tq, tk, generator=g) > 0.4
    allowed[..., 0] = True
    given = allowed if mask == "bool" else fused_llama.attention_bias(allowed, nh // nk)
    ours = _value_and_grads(lambda *a: fused_llama.eager_attention(*a, given), (q, k, v), 3)
    plain = _value_and_grads(lambda *a: _plain_attention(*a, allowed), (q, k, v), 3)
    assert all(torch.equal(a, b) for a, b in zip(ours, plain))
    assert ours[1].abs().max() > 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rms_norm_gives_the_bits_of_f_rms_norm_and_autograds_gradients(dtype):
    g = torch.Generator().manual_seed(2)
    h, weight = torch.randn(3, 5, 16, generator=g) * 3, torch.randn(16, generator=g)

    w = types.SimpleNamespace(eps=1e-5, dtype=dtype)   # the two attributes `Weights.norm` reads
    ours = _value_and_grads(lambda x, wt: fused_llama.Weights.norm(w, x, wt), (h, weight), 2)
    plain = _value_and_grads(lambda x, wt: F.rms_norm(x, (16,), wt, 1e-5).to(dtype), (h, weight), 2)
    assert ours[0].dtype == dtype and torch.equal(ours[0], plain[0])
    for a, b in zip(ours[1:], plain[1:]):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def _plain_swiglu(gu):
    gate, up = gu.chunk(2, -1)
    return F.silu(gate) * up


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("width", [64, 37])   # 37: a row length with a vector loop's scalar tail
def test_swiglu_gives_autograds_values_and_gradients_bit_for_bit(dtype, width):
    from rlvr.models.fused_ops import SwiGLU

    gu = (torch.randn(3, 5, 2 * width, generator=torch.Generator().manual_seed(4)) * 3).to(dtype)
    plain = _value_and_grads(_plain_swiglu, [gu], 1)
    fused = _value_and_grads(SwiGLU.apply, [gu], 1)
    for a, b in zip(plain, fused):
        assert a.dtype == b.dtype and torch.equal(a, b)
