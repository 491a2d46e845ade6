"""Reasoner episodes as training rows for the agentic cold start (`rlvr sft --task agentic`).

`episode_tokens` encodes a reasoner episode exactly as `run_episodes` lays out a sampled one
(model turn + EOS, then the rendered observation), so the cold start and RL see the same token
layout; `reasoner_batches` draws batches of them, encoded, for `training.sft.sft_episodes`.
Guaranteed: the loss mask is 1 on model tokens and 0 on observation tokens. Not guaranteed: any
other call format's layout unless it is passed as `fmt`.
"""

from __future__ import annotations

import random

from rlvr.agents.calls import CallFormat, PlainFormat
from rlvr.models.policy import encode_prompt


def episode_tokens(tokenizer, turns, fmt: CallFormat | None = None) -> tuple[list[int], list[int]]:
    """(ids, loss mask) of a reasoner episode [(turn text, observation | None), ...]."""
    fmt = fmt or PlainFormat()
    ids: list[int] = []
    mask: list[int] = []
    for text, obs in turns:
        turn = list(tokenizer(text, add_special_tokens=False)["input_ids"]) + [tokenizer.eos_token_id]
        ids += turn
        mask += [1] * len(turn)
        if obs is not None:
            o = list(tokenizer(fmt.render(obs), add_special_tokens=False)["input_ids"])
            ids += o
            mask += [0] * len(o)
    return ids, mask


def reasoner_batches(task, tokenizer, batch_size: int, seed: int, tamper_share: float = 0.0):
    """batches(step) -> [(prompt ids, episode ids, loss mask), ...] of reasoner episodes; a
    `tamper_share` of them take the tamper shortcut."""
    def batches(step: int):
        rng = random.Random(f"{seed}/sft/{step}")
        rows = [(p, task.episode(p, tamper=rng.random() < tamper_share))
                for p in task.sample(rng, batch_size)]
        return [(encode_prompt(tokenizer, p), *episode_tokens(tokenizer, turns)) for p, turns in rows]
    return batches
