"""The decode-only layer step (`models.decode_step`, `Decoder.step`): the same computation as the
general forward (`run_layers`, used by the prefill and the update) for one token per row."""

import pytest
import torch

from rlvr.models import decode_step, fused_llama
from rlvr.models.device import cpu_computes_bf16
from rlvr.models.fused_ops import QKVRotary
from rlvr.models.policy import positions
from rlvr.testing import zoo

torch.set_num_threads(1)


def test_sign_folded_rotary_is_the_rotate_half_rotary_bit_for_bit():
    w = fused_llama.Weights(zoo.gqa_llama())
    cos, sin = w.rope_table(40)
    pos = torch.tensor([3, 17, 39, 0, 25])
    x = torch.randn(5, 6, w.head_dim).to(torch.bfloat16)           # [B, heads, D]: 4 query heads, 2 key
    # the training forward's rotary (`fused_ops.QKVRotary`, one token per row, v heads zero)
    qkv = torch.cat([x, torch.zeros(5, 2, w.head_dim, dtype=x.dtype)], 1).reshape(5, 1, -1)
    q, k, _ = QKVRotary.apply(qkv, cos[pos][:, None, None], sin[pos][:, None, None], 4, 2)
    theirs = torch.cat([q, k], 1)[:, :, 0]
    ours = decode_step._rotate(x, cos[pos][:, None], decode_step.fold_sin(sin)[pos][:, None])
    assert torch.equal(ours.to(torch.bfloat16), theirs)


def _steps(model, dtype, weights, use_step: bool, n: int = 2, steps: int = 3, grow: bool = False):
    """Logits of each decode step after a shared-prompt prefill, through `step` or `forward`, and
    the key cache after them (with `grow`, a cache allocated for the prompt and widened as the
    steps need columns)."""
    ids = torch.tensor([[0, 0, 5, 9, 11], [3, 4, 5, 6, 7]])
    mask = (torch.arange(5) >= torch.tensor([[2], [0]])).long()
    pos = positions(mask)
    dec = decode_step.Decoder(model, dtype, weights)
    dec.allocate(2 * n, 5 + steps, filled=5 if grow else None)
    cos, sin = dec.w.rope_table(5 + steps + 1)
    folded = decode_step.fold_sin(sin)
    keys = torch.cat([mask.bool().repeat_interleave(n, 0), torch.zeros(2 * n, steps, dtype=torch.bool)], 1)
    nxt = pos[:, -1].repeat_interleave(n) + 1
    out = []
    with torch.no_grad():
        logits = dec.forward(ids, cos[pos][:, None], sin[pos][:, None], 0, fused_llama.prefix_mask(mask),
                             repeat=n)
        for t in range(steps):
            tokens = logits.argmax(-1) if t else torch.tensor([1, 2, 3, 4])
            keys[:, 5 + t] = True
            if use_step:
                logits = dec.step(tokens, cos[nxt][:, None], folded[nxt][:, None], 5 + t, keys)
            else:
                logits = dec.forward(tokens[:, None], cos[nxt][:, None, None], sin[nxt][:, None, None], 5 + t,
                                     keys[:, None, None, :6 + t])
            out.append(logits)
            nxt = nxt + 1
    return out, dec.k_cache[1].clone()


def test_decode_step_equals_the_general_forward_bit_for_bit_in_float32():
    model = zoo.gqa_llama()
    with torch.no_grad():     # larger weights than the init, so attention is far from uniform
        for p in model.parameters():
            p.mul_(4.0)
    (ours, our_keys), (theirs, their_keys) = (_steps(model, torch.float32, None, s) for s in (True, False))
    assert all(torch.equal(a, b) for a, b in zip(ours, theirs))
    assert torch.equal(our_keys, their_keys)


@pytest.mark.skipif(not cpu_computes_bf16(), reason="bf16 decode checked where bf16 is native")
def test_decode_step_over_the_whole_bf16_cache_stays_at_float_rounding_of_the_forward():
    """bf16: attention over every cache column (unfilled ones masked) sums the same products as over
    the filled ones, only possibly in another order: the logits agree to bf16 rounding (two ulps at
    these logits; on the CPUs measured, bit for bit)."""
    model = zoo.gqa_llama()
    w = fused_llama.WeightCache(model, torch.bfloat16).get()
    (ours, our_keys), (theirs, their_keys) = (_steps(model, torch.bfloat16, w, s) for s in (True, False))
    assert torch.equal(our_keys, their_keys)       # rotary and the cache write: exact
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, atol=4e-3, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_cache_that_grows_by_chunks_gives_the_full_cache_s_logits(dtype, monkeypatch):
    """`Decoder.allocate(filled=)` + `reserve`: the cache starts as wide as the prompt plus a chunk
    and widens a chunk at a time; the steps see the same keys and values, so the same logits
    (float32: bit for bit; bf16 attends over every allocated column, the masked ones adding
    zeros: to rounding, bit for bit on the CPUs measured)."""
    if dtype == torch.bfloat16 and not cpu_computes_bf16():
        pytest.skip("bf16 decode checked where bf16 is native")
    monkeypatch.setattr(decode_step, "GROW_COLUMNS", 2)
    model = zoo.gqa_llama()
    w = fused_llama.WeightCache(model, dtype).get()
    widths = []
    step = decode_step.Decoder.step

    def watching(self, *args):
        out = step(self, *args)
        widths.append(self.k_cache[0].shape[2])
        return out

    monkeypatch.setattr(decode_step.Decoder, "step", watching)
    (grown, grown_keys) = _steps(model, dtype, w, True, steps=6, grow=True)
    assert widths == [7, 7, 9, 9, 11, 11]            # 5 prompt columns + 2, then 2 at a time, up to 5 + 6
    widths.clear()
    (full, full_keys) = _steps(model, dtype, w, True, steps=6)
    assert widths == [11] * 6
    assert torch.equal(grown_keys, full_keys)
    for a, b in zip(grown, full):
        if dtype == torch.float32:
            assert torch.equal(a, b)
        else:
            torch.testing.assert_close(a, b, atol=4e-3, rtol=0)


def test_a_cache_never_grows_past_its_length():
    dec = decode_step.Decoder(zoo.gqa_llama())
    dec.allocate(2, 6, filled=3)
    dec.reserve(6)
    assert dec.k_cache[0].shape[2] == 6
    with pytest.raises(ValueError, match="column 6 is beyond the 6"):
        dec.reserve(7)
