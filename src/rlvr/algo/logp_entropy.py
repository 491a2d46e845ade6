"""Per-token log-probs and entropies from one log-softmax, with a hand-written backward.

`logp_entropy(logits [N, V], tokens [N], temperature)` returns log π(token) and the entropy of
π = softmax(logits / temperature) for N rows (the real completion tokens of a batch, padding
already left out). It computes what `policy.token_logprobs` and `losses.token_entropy` compute
from the same logits, from ONE log-softmax instead of two, and its backward is one expression over
the vocabulary instead of autograd's chain through two log-softmaxes, an exp, a comparison, a fill
and a product: with a 49k vocabulary those full-width passes cost as much as the LM head's matmul.

Why it is exact: d log π(t)/dz = onehot(t) − π and dH/dz = −π·(log π + H), so the gradient of
g₁·log π(t) + g₂·H with respect to the logits is (g₁·onehot(t) − π·(g₁ + g₂·(log π + H))) / T.
Guaranteed: the log-probs are bit-identical to `token_logprobs` on the same logits (the same
log-softmax), the entropies equal `token_entropy`'s (the same products, summed in the same order)
and the gradients agree with autograd's through those two functions to float rounding. Memory:
the backward keeps the log-softmax and the softmax [N, V] in float32 (N: real tokens only).
Not supported: −inf logits (a masked vocabulary); the CPU training forward never masks.
"""

from __future__ import annotations

import torch
from torch import Tensor


# elements of one row block of the forward: 256K float32 (1 MiB) fits a core's L2 with its copies
CHUNK_ELEMENTS = 1 << 18


class _LogpEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits: Tensor, tokens: Tensor, temperature: float):
        n, v = logits.shape
        logp = torch.empty((n, v), dtype=torch.float32, device=logits.device)
        probs = torch.empty_like(logp)
        entropy = torch.empty(n, dtype=torch.float32, device=logits.device)
        # row blocks of about CHUNK_ELEMENTS: the float copy, the division and the entropy's
        # product stay in the core's cache, and memory sees one read of the logits and one write
        # each of log π and π (every op here works row by row: the same bits as whole-tensor ops)
        rows = max(1, CHUNK_ELEMENTS // max(v, 1))
        for start in range(0, n, rows):
            block = slice(start, start + rows)
            z = logits[block].float()
            if temperature != 1.0:
                # a fresh float32 copy when logits are not float32 already (divided in place); a
                # view of the caller's logits otherwise (never divided in place)
                z = z / temperature if logits.dtype == torch.float32 else z.div_(temperature)
            torch.log_softmax(z, dim=-1, out=logp[block])
            torch.exp(logp[block], out=probs[block])
            torch.neg((probs[block] * logp[block]).sum(-1), out=entropy[block])
        ctx.save_for_backward(logp, probs, entropy, tokens)
        ctx.temperature, ctx.dtype = temperature, logits.dtype
        ctx.set_materialize_grads(False)   # an output the loss never used arrives as None, not zeros
        return logp.gather(-1, tokens[:, None]).squeeze(-1), entropy

    @staticmethod
    def backward(ctx, g_logp: Tensor | None, g_entropy: Tensor | None):
        logp, probs, entropy, tokens = ctx.saved_tensors
        inv_t = 1.0 / ctx.temperature
        g1 = torch.zeros_like(entropy) if g_logp is None else g_logp.float()
        at_token = (g1 * inv_t)[:, None]
        if g_entropy is None:
            # the usual case (no entropy term in the loss): −π·g₁/T, one pass over the vocabulary
            # written straight in the logits' dtype, the token's column added in float32 first
            coef = (-g1 * inv_t)[:, None]
            grad = torch.empty(logp.shape, dtype=ctx.dtype)
            torch.mul(probs, coef, out=grad)
            token_col = probs.gather(-1, tokens[:, None]) * coef + at_token
            return grad.scatter_(-1, tokens[:, None], token_col.to(ctx.dtype)), None, None
        g2 = g_entropy.float()
        # −π·(g₂·log π + g₁ + g₂·H) / T, as π·(a·log π + c) with a = −g₂/T, c = −(g₁ + g₂·H)/T
        grad = torch.addcmul((-(g1 + g2 * entropy) * inv_t)[:, None], logp, (-g2 * inv_t)[:, None])
        grad.mul_(probs)
        grad.scatter_add_(-1, tokens[:, None], at_token)
        return grad.to(ctx.dtype), None, None


def logp_entropy(logits: Tensor, tokens: Tensor, temperature: float = 1.0) -> tuple[Tensor, Tensor]:
    """(log π(token) [N], entropy [N]) under softmax(logits / temperature), logits [N, V] in any
    float dtype (computed in float32), tokens [N] int64."""
    if logits.shape[0] == 0:   # no real token here: empty results, still on the graph (backward works)
        empty = logits.float().sum(-1)
        return empty, empty * 0
    return _LogpEntropy.apply(logits, tokens, temperature)
