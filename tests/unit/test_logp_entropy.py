"""One log-softmax with a hand-written backward gives the log-probs and entropies the two separate
functions give, and the same gradients; the CPU training forward built on it gives what the fused
backend's full-logits path gives, at the real completion tokens, for bf16 and float32 matrices."""

import copy

import pytest
import torch

from rlvr.algo.logp_entropy import logp_entropy
from rlvr.algo.losses import token_entropy
from rlvr.models import backends, fused_llama, packed
from rlvr.models.policy import token_logprobs
from rlvr.models.tiny import build_model
from rlvr.training import forward
from rlvr.models.batch import Batch
from rlvr.training.update import Compute

torch.set_num_threads(1)


def _logits(dtype=torch.float32):
    g = torch.Generator().manual_seed(0)
    return (torch.randn(37, 300, generator=g) * 4).to(dtype), torch.randint(0, 300, (37,), generator=g)


def _reference(logits, tokens, temperature):
    z = logits.float()
    if temperature != 1.0:
        z = z / temperature
    return token_logprobs(z[None], tokens[None])[0], token_entropy(z[None])[0]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_values_are_those_of_token_logprobs_and_token_entropy(dtype, temperature):
    logits, tokens = _logits(dtype)
    before = logits.clone()
    logp, entropy = logp_entropy(logits, tokens, temperature)
    ref_logp, ref_entropy = _reference(logits, tokens, temperature)
    assert torch.equal(logp, ref_logp) and torch.equal(entropy, ref_entropy)
    assert torch.equal(logits, before)   # the caller's logits are never divided in place


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("weights", [(1.0, 0.3), (1.0, 0.0), (0.0, 1.0)])
def test_gradients_are_autograds_through_the_two_functions(dtype, weights):
    logits, tokens = _logits(dtype)
    g = torch.Generator().manual_seed(1)
    g1, g2 = (torch.randn(37, generator=g) * w for w in weights)
    grads = []
    for fn in (logp_entropy, _reference):
        x = logits.clone().requires_grad_()
        logp, entropy = fn(x, tokens, 0.7)
        loss = (logp * g1).sum() if weights[0] else 0.0
        loss = loss + (entropy * g2).sum() if weights[1] else loss
        loss.backward()
        grads.append(x.grad)
    assert grads[0].dtype == dtype
    tol = 1e-6 if dtype == torch.float32 else 1e-2
    torch.testing.assert_close(grads[0].float(), grads[1].float(), atol=tol, rtol=tol)
    assert grads[1].abs().max() > 1e-3


def _batch(vocab: int, pad: int) -> Batch:
    """Five rows; with `pad`, that many columns of padding left of every prompt and right of
    every completion (a micro-batch of rows shorter than the batch's longest)."""
    g = torch.Generator().manual_seed(2)
    p_ids = torch.randint(3, vocab, (5, 6 + pad), generator=g)
    p_mask = torch.ones_like(p_ids)
    p_mask[:, :pad] = 0
    p_mask[1, :pad + 2] = 0
    c_ids = torch.randint(3, vocab, (5, 7 + pad), generator=g)
    c_mask = torch.ones_like(c_ids)
    for row, n in enumerate([7, 3, 1, 5, 6]):
        c_mask[row, n:] = 0
    return Batch(p_ids, p_mask, c_ids, c_mask, torch.zeros(5), torch.zeros(c_ids.shape))


def _full_logits_path(model, compute, autocast):
    """The reference: every completion position's logits (`fused_llama.completion_logits`, padding
    included), then the log-softmax over them, as the fused backend computed before."""
    dtype = torch.bfloat16 if autocast else torch.float32
    return lambda batch, t: backends._from_logits(
        fused_llama.completion_logits(model, batch.prompt_ids, batch.prompt_mask, batch.completion_ids,
                                      batch.completion_mask, dtype), batch, t)


@pytest.mark.parametrize("pad", [0, 3])
@pytest.mark.parametrize("autocast", [False, True])
def test_training_forward_matches_the_full_logits_path(autocast, pad):
    model, _ = build_model(seed=3, hidden=32, layers=2, heads=4, mlp=64)
    batch = _batch(model.config.vocab_size, pad)
    real = batch.completion_mask.bool()
    weight = torch.randn(real.shape, generator=torch.Generator().manual_seed(4))
    out = []
    for fwd in (forward.choose, _full_logits_path):
        m = copy.deepcopy(model)
        logp, entropy = fwd(m, Compute(), autocast)(batch, 0.7)
        ((logp * weight)[real].sum() + (entropy * weight)[real].sum() * 0.1).backward()
        out.append((logp.detach(), entropy.detach(), [p.grad for p in m.parameters()]))
    (lp, ent, grads), (ref_lp, ref_ent, ref_grads) = out
    assert lp[~real].abs().max() == 0 and ent[~real].abs().max() == 0
    tol = 1e-5 if not autocast else 2e-2
    torch.testing.assert_close(lp[real], ref_lp[real], atol=tol, rtol=tol)
    torch.testing.assert_close(ent[real], ref_ent[real], atol=tol, rtol=tol)
    for a, b in zip(grads, ref_grads):
        torch.testing.assert_close(a, b, atol=tol, rtol=tol)


def test_padding_never_reaches_the_layers(monkeypatch):
    """The fused training forward runs the layers over the call's real tokens packed into one
    sequence (`models.packed`): no padding position, not even a row's own (rows here are 3-7
    completion tokens in 10 columns, prompts 4-6 in 9), only the rows that round the sequence up
    to its bucket (`packed.bucketed`)."""
    model, _ = build_model(seed=3, hidden=32, layers=2, heads=4, mlp=64)
    shapes = []
    real = fused_llama.run_layers
    monkeypatch.setattr(fused_llama, "run_layers",
                        lambda w, h, *a: shapes.append(tuple(h.shape[:2])) or real(w, h, *a))
    batch = _batch(model.config.vocab_size, pad=3)
    forward.choose(model, Compute(), False)(batch, 1.0)
    real_tokens = int(batch.prompt_mask.sum() + batch.completion_mask.sum())
    assert real_tokens == 50 and shapes == [(1, packed.bucketed(50))] == [(1, 64)]
    assert 64 < batch.prompt_ids.shape[0] * (batch.prompt_ids.shape[1] + batch.completion_ids.shape[1])


def test_a_call_without_real_tokens_still_backpropagates():
    logits = torch.randn(0, 300, requires_grad=True)
    logp, entropy = logp_entropy(logits, torch.zeros(0, dtype=torch.long), 0.7)
    assert logp.shape == entropy.shape == (0,)
    (logp.sum() + entropy.sum()).backward()   # a micro-batch of empty completions: no error, zero gradient
    assert logits.grad.shape == logits.shape


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("rows_per_block", [1, 5, 37, 64])
def test_row_blocks_give_the_bits_of_one_block(dtype, rows_per_block, monkeypatch):
    """The forward works in row blocks (cache-sized); any block size gives the same values, the
    reference functions' bits (a block of 5 rows leaves a last block of 2 of the 37)."""
    from rlvr.algo import logp_entropy as module

    logits, tokens = _logits(dtype)
    monkeypatch.setattr(module, "CHUNK_ELEMENTS", rows_per_block * logits.shape[1])
    logp, entropy = logp_entropy(logits, tokens, 0.7)
    ref_logp, ref_entropy = _reference(logits, tokens, 0.7)
    assert torch.equal(logp, ref_logp) and torch.equal(entropy, ref_entropy)
