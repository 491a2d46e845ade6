"""Drawing the next token from float32 logits, with its log-prob: shared by the CPU and GPU decodes.

Recorded log-probs are behaviour log-probs as `rlvr.rollout.base` defines them: under the
distribution actually sampled from, softmax(logits / temperature) after min-p, top-k, then top-p
truncation, renormalised (`truncated_logp`). `sample_next` draws with an explicit generator (the
CPU engine), one uniform per row; `sample_on_device` with the device's default generator, as an
exponential race (argmax p / E, E ~ Exp(1)), which CUDA graphs can capture and replay.
"""

from __future__ import annotations

import math

import torch

from rlvr.rollout.base import SamplingParams


def top_p_filter(logits: torch.Tensor, top_p: float) -> torch.Tensor:
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    cum = sorted_logits.softmax(-1).cumsum(-1)
    drop = cum - sorted_logits.softmax(-1) > top_p  # keep the token that crosses top_p
    sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
    return torch.empty_like(logits).scatter_(-1, order, sorted_logits)


def top_k_filter(logits: torch.Tensor, top_k: int) -> torch.Tensor:
    if top_k >= logits.shape[-1]:
        return logits
    kth = logits.topk(top_k, dim=-1).values[..., -1:]        # ties with the k-th are all kept
    return logits.masked_fill(logits < kth, float("-inf"))


def truncate(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """logits / T after min-p, then top-k, then top-p (its mass taken on the top-k-renormalised distribution,
    as vLLM does); −inf outside the kept set, not yet normalised."""
    scaled = logits / params.temperature if params.temperature != 1.0 else logits
    if params.min_p > 0:   # p < min_p * p_max, in log space: z/T < max(z/T) + log(min_p)
        floor = scaled.amax(-1, keepdim=True) + math.log(params.min_p)
        scaled = scaled.masked_fill(scaled < floor, float("-inf"))
    if params.top_k > 0:
        scaled = top_k_filter(scaled, params.top_k)
    if params.top_p < 1.0:
        scaled = top_p_filter(scaled, params.top_p)
    return scaled


def truncated_logp(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """log μ over the vocabulary [B, V]: `truncate`, renormalised; −inf outside."""
    return torch.log_softmax(truncate(logits, params), dim=-1)


def sample_next(logits: torch.Tensor, params: SamplingParams, gen: torch.Generator):
    """(token [B], its behaviour log-prob [B]) for float32 logits [B, V]. Greedy: the token's
    log_softmax(logits) at T = 1 (evaluation only; not a behaviour log-prob).

    The draw inverts the cumulative distribution at one uniform per row (`invert_cdf`): one random
    number per row instead of the one per vocabulary entry that `torch.multinomial` draws, which
    on a 49k vocabulary cost a fifth of a decode step. The log-prob is the sampled token's
    logit minus the log of the row's normaliser, so log μ is never built over the vocabulary."""
    if params.greedy:
        nxt = logits.argmax(dim=-1)
        return nxt, torch.log_softmax(logits, dim=-1).gather(-1, nxt[:, None]).squeeze(-1)
    scaled = truncate(logits, params)
    peak = scaled.amax(-1, keepdim=True)   # the max without its indices: a third of the time
    cdf = (scaled - peak).exp_().cumsum_(-1)   # unnormalised: u is scaled by the total instead
    nxt = invert_cdf(cdf, torch.rand(cdf.shape[0], 1, generator=gen, device=cdf.device))
    logp = scaled.gather(-1, nxt[:, None]) - peak - cdf[:, -1:].log()
    return nxt, logp.squeeze(-1)


def invert_cdf(cdf: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """The first index whose cumulative weight exceeds u·total, per row of cdf [B, V] (cumulative
    sums of non-negative weights; u [B, 1] uniform in [0, 1)): a draw proportional to the weights
    that never lands on a zero-weight entry (its cumulative sum equals the one before it, so it is
    never the first to exceed)."""
    # u < 1 keeps u·total < total (a correctly rounded product of floats), so some entry exceeds it
    return torch.searchsorted(cdf, u * cdf[:, -1:], right=True).squeeze(-1)


def sample_on_device(logits: torch.Tensor, params: SamplingParams):
    """(token [B], log-prob [B]) from float32 logits; the draw uses the default generator."""
    if params.greedy:
        nxt = logits.argmax(-1)
        return nxt, torch.log_softmax(logits, -1).gather(-1, nxt[:, None]).squeeze(-1)
    logp = truncated_logp(logits, params)
    probs = logp.exp()
    race = torch.empty_like(probs).exponential_()     # argmax p/E, E ~ Exp(1): a draw from p
    nxt = (probs / race).argmax(-1)
    return nxt, logp.gather(-1, nxt[:, None]).squeeze(-1)
