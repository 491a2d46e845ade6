"""Drawing the next token from float32 logits, with its log-prob: shared by the CPU and GPU decodes.

Recorded log-probs are under softmax(logits / temperature), before top-p truncation (the quantity
the trainer recomputes). `sample_next` draws with an explicit generator (the CPU engine);
`sample_on_device` with the device's default generator, as an exponential race (argmax p / E,
E ~ Exp(1)), which CUDA graphs can capture and replay.
"""

from __future__ import annotations

import torch

from rlvr.rollout.base import SamplingParams


def top_p_filter(logits: torch.Tensor, top_p: float) -> torch.Tensor:
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    cum = sorted_logits.softmax(-1).cumsum(-1)
    drop = cum - sorted_logits.softmax(-1) > top_p  # keep the token that crosses top_p
    sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
    return torch.empty_like(logits).scatter_(-1, order, sorted_logits)


def sample_next(logits: torch.Tensor, params: SamplingParams, gen: torch.Generator):
    """(token [B], its log-prob under softmax(logits / T) [B]) for float32 logits [B, V]."""
    if params.greedy:
        nxt = logits.argmax(dim=-1)
        return nxt, torch.log_softmax(logits, dim=-1).gather(-1, nxt[:, None]).squeeze(-1)
    scaled = logits / params.temperature if params.temperature != 1.0 else logits
    logp = torch.log_softmax(scaled, dim=-1)
    probs = torch.softmax(top_p_filter(scaled, params.top_p), -1) if params.top_p < 1.0 else logp.exp()
    nxt = torch.multinomial(probs, 1, generator=gen).squeeze(-1)
    return nxt, logp.gather(-1, nxt[:, None]).squeeze(-1)


def sample_on_device(logits: torch.Tensor, params: SamplingParams):
    """(token [B], log-prob [B]) from float32 logits; the draw uses the default generator."""
    if params.greedy:
        nxt = logits.argmax(-1)
        return nxt, torch.log_softmax(logits, -1).gather(-1, nxt[:, None]).squeeze(-1)
    scaled = logits / params.temperature if params.temperature != 1.0 else logits
    logp = torch.log_softmax(scaled, -1)
    probs = torch.softmax(top_p_filter(scaled, params.top_p), -1) if params.top_p < 1.0 else logp.exp()
    race = torch.empty_like(probs).exponential_()     # argmax p/E, E ~ Exp(1): a draw from p
    nxt = (probs / race).argmax(-1)
    return nxt, logp.gather(-1, nxt[:, None]).squeeze(-1)
