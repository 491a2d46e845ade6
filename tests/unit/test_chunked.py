"""Chunked LM-head log-probs and entropies equal the plain full-logit computation, with gradients."""

import pytest
import torch

from rlvr.algo.losses import token_entropy
from rlvr.models.policy import token_logprobs
from rlvr.training.chunked import logprob_entropy


def _plain(hidden, weight, tokens, temperature, limit=None):
    w = weight if limit is None else weight[:limit]
    logits = (hidden @ w.t()).float() / temperature
    return token_logprobs(logits, tokens), token_entropy(logits)


@pytest.mark.parametrize("chunk_rows,temperature", [(3, 1.0), (7, 0.6), (100, 1.3)])
def test_values_and_gradients_match_plain(chunk_rows, temperature):
    g = torch.Generator().manual_seed(0)
    hidden = torch.randn(10, 8, generator=g, dtype=torch.float64).requires_grad_()
    weight = torch.randn(13, 8, generator=g, dtype=torch.float64).requires_grad_()
    tokens = torch.randint(0, 13, (10,), generator=g)
    mix = torch.randn(10, generator=g, dtype=torch.float64)   # a loss that uses both outputs

    lp, ent = logprob_entropy(hidden, weight, tokens, temperature, chunk_rows)
    ((lp * mix).sum() + (ent * mix.flip(0)).sum()).backward()
    grads = hidden.grad.clone(), weight.grad.clone()
    hidden.grad = weight.grad = None

    lp0, ent0 = _plain(hidden, weight, tokens, temperature)
    ((lp0 * mix).sum() + (ent0 * mix.flip(0)).sum()).backward()
    torch.testing.assert_close(lp, lp0.float(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ent, ent0.float(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(grads[0], hidden.grad, rtol=1e-4, atol=1e-5)   # float32 rounding
    torch.testing.assert_close(grads[1], weight.grad, rtol=1e-4, atol=1e-5)


def test_vocab_limit_drops_padded_rows_of_the_head():
    g = torch.Generator().manual_seed(1)
    hidden, weight = torch.randn(5, 4, generator=g), torch.randn(9, 4, generator=g)
    tokens = torch.randint(0, 6, (5,), generator=g)
    lp, ent = logprob_entropy(hidden, weight, tokens, 1.0, 2, vocab_limit=6)
    lp0, ent0 = _plain(hidden, weight, tokens, 1.0, limit=6)
    torch.testing.assert_close(lp, lp0)
    torch.testing.assert_close(ent, ent0)
    assert not torch.allclose(lp, _plain(hidden, weight, tokens, 1.0)[0])


def test_backward_keeps_one_chunk_of_logits():
    """Autograd saves the chunks' inputs, not their [n, V] logits (the point of chunking)."""
    saved = []
    hidden = torch.randn(64, 16, requires_grad=True)
    weight = torch.randn(1000, 16, requires_grad=True)
    tokens = torch.randint(0, 1000, (64,))

    def pack(t):
        saved.append(t.numel())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        logprob_entropy(hidden, weight, tokens, 1.0, 8)
    assert max(saved) < 64 * 1000
    saved.clear()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        _plain(hidden, weight, tokens, 1.0)
    assert max(saved) >= 64 * 1000
