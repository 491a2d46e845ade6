"""Token log-probs and entropies without the full-vocabulary logits of the whole batch.

For a 151,936-token vocabulary, 128 sequences × 288 positions of float32 logits are 22 GB, and
autograd would keep them (and a softmax of the same size) for the backward pass. `logprob_entropy`
computes the LM head in row chunks under activation checkpointing: the forward keeps only each
chunk's inputs, and the backward recomputes one chunk's logits at a time, so peak memory for the
head is one chunk's logits (chunk × V floats) instead of N × V.

A pure function: tensors in, tensors out; no devices or configs. It computes exactly
log softmax(h·Wᵀ / T)[token] and the entropy of softmax(h·Wᵀ / T), with logits in float32, i.e.
what `policy.token_logprobs` and `losses.token_entropy` compute from full logits; values and
gradients agree with that to float rounding (tested on CPU). Chosen over a fused
linear-cross-entropy kernel from a library (Liger, Apple's cut-cross-entropy) because those return
the loss, not per-token log-probs *and* entropies with gradients for both, and would add a
dependency that must travel to the GPU machine.
"""

from __future__ import annotations

import torch
from torch.utils.checkpoint import checkpoint


def _chunk(hidden: torch.Tensor, weight: torch.Tensor, tokens: torch.Tensor,
           temperature: float) -> tuple[torch.Tensor, torch.Tensor]:
    logits = (hidden @ weight.t()).float()                       # [n, V]
    if temperature != 1.0:
        logits = logits / temperature
    lse = torch.logsumexp(logits, dim=-1)                        # [n]
    logp = logits.gather(-1, tokens[:, None]).squeeze(-1) - lse
    entropy = lse - (torch.softmax(logits, dim=-1) * logits).sum(-1)
    return logp, entropy


def logprob_entropy(hidden: torch.Tensor, weight: torch.Tensor, tokens: torch.Tensor,
                    temperature: float = 1.0, chunk_rows: int = 1024,
                    vocab_limit: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(log π(token) [N], entropy [N]) for hidden [N, d] (after the final norm), head weight
    [V, d] and tokens [N], in chunks of `chunk_rows` rows. `vocab_limit` keeps only the first
    ids of the head (a tokenizer smaller than the model's padded vocabulary: ids it cannot produce
    are never sampled, so they are left out of the softmax here too)."""
    if vocab_limit is not None and vocab_limit < weight.shape[0]:
        weight = weight[:vocab_limit]
    if hidden.shape[0] == 0:
        empty = hidden.new_zeros(0, dtype=torch.float32)
        return empty, empty
    needs_grad = torch.is_grad_enabled() and (hidden.requires_grad or weight.requires_grad)
    logps, entropies = [], []
    for start in range(0, hidden.shape[0], chunk_rows):
        args = (hidden[start:start + chunk_rows], weight, tokens[start:start + chunk_rows], temperature)
        if needs_grad:
            lp, ent = checkpoint(_chunk, *args, use_reentrant=False)
        else:
            lp, ent = _chunk(*args)
        logps.append(lp)
        entropies.append(ent)
    return torch.cat(logps), torch.cat(entropies)
