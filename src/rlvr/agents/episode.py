"""The multi-turn rollout loop: model turns and environment observations, as token ids.

An episode alternates a model turn (sampled by the engine from the episode's token ids so far,
ending at the end-of-turn token) and, when the turn is a tool call, the environment's observation
(rendered by the call format and encoded once, without special tokens). It ends when the model
answers without a tool call ("stop"), the turn budget runs out ("turns"), the token budget runs out
or a turn hits its per-turn cap ("tokens"), or the environment ends it ("env").

Guaranteed (the contract of docs/design/behaviour_policy.md): `Completion.token_ids` is the engine's
sampled ids and the observations' encoded ids concatenated in order, never re-tokenised from the
joined text; `loss_mask` is 1 exactly on sampled ids; `logprobs` holds the engine's behaviour
log-probs on sampled ids and 0.0 on environment ids (which the mask excludes). The same seed,
weights and (deterministic) environments give the same episodes. Episodes of one call decode
together, one engine call per turn. Not guaranteed: KV reuse across turns (each turn re-reads
the prefix), or that the decoded `text` re-encodes to `token_ids`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Sequence

import torch

from rlvr.agents.calls import CallFormat, PlainFormat
from rlvr.agents.env import EnvFactory, Environment
from rlvr.monitor.stats import FINISH_REASONS, episode_metrics  # noqa: F401 - their home is monitor
from rlvr.rollout.base import PromptEncoder, SamplingParams
from rlvr.types import Completion, Group, Problem

@dataclass(frozen=True)
class Budget:
    max_turns: int = 4          # model turns per episode
    max_tokens: int = 96        # model + environment tokens after the prompt
    turn_tokens: int = 24       # new tokens per model turn


@dataclass
class _Episode:
    env: Environment
    prompt: list[int]
    ids: list[int] = field(default_factory=list)
    logps: list[float] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    turns: int = 0
    finish: str | None = None


def run_episodes(engine, tokenizer, problems: Sequence[Problem], n: int, make_env: EnvFactory,
                 params: SamplingParams, seed: int, budget: Budget = Budget(),
                 fmt: CallFormat | None = None, use_chat_template: bool = True) -> list[Group]:
    """n scored episodes per problem. `engine` needs `continue_ids(prefixes, params, generator)`
    (e.g. `HFEngine`); each completion's `score` is its environment's `score()`."""
    fmt = fmt or PlainFormat()
    gen = torch.Generator().manual_seed(seed)
    prompts = PromptEncoder(tokenizer, use_chat_template).encode_all(problems)
    episodes = []
    for p, prompt in zip(problems, prompts):
        for _ in range(n):
            env = make_env(p)
            env.reset(p)
            episodes.append(_Episode(env, prompt))
    try:
        while live := [e for e in episodes if e.finish is None]:
            room = max(budget.max_tokens - len(e.ids) for e in live)
            turn = replace(params, max_new_tokens=min(budget.turn_tokens, room), stop=())
            rows = engine.continue_ids([e.prompt + e.ids for e in live], turn, gen)
            for e, (tokens, logps, reason) in zip(live, rows):
                _advance(e, tokens, logps, reason, tokenizer, fmt, budget)
        completions = [_completion(e, tokenizer) for e in episodes]
    finally:
        for e in episodes:
            e.env.close()
    return [Group(p, prompts[i], completions[i * n:(i + 1) * n]) for i, p in enumerate(problems)]


def _advance(e: _Episode, tokens: list[int], logps: list[float], reason: str, tokenizer,
             fmt: CallFormat, budget: Budget) -> None:
    """Append one sampled turn (and the observation it earns) to an episode, or finish it."""
    room = budget.max_tokens - len(e.ids)
    cut = len(tokens) > room
    tokens, logps = tokens[:room], logps[:room]
    e.ids += tokens
    e.logps += logps
    e.mask += [1] * len(tokens)
    e.turns += 1
    if cut or reason != "stop":
        e.finish = "tokens"
        return
    call = fmt.parse(tokenizer.decode(tokens[:-1], skip_special_tokens=False))
    if call is None:
        e.finish = "stop"
        return
    step = e.env.step(call)
    obs = list(tokenizer(fmt.render(step.observation), add_special_tokens=False)["input_ids"])
    if step.done:
        e.finish = "env"
    elif e.turns >= budget.max_turns:
        e.finish = "turns"
    elif len(e.ids) + len(obs) >= budget.max_tokens:
        e.finish = "tokens"
    else:
        e.ids += obs
        e.logps += [0.0] * len(obs)
        e.mask += [0] * len(obs)


def _completion(e: _Episode, tokenizer) -> Completion:
    text = tokenizer.decode(e.ids, skip_special_tokens=True)
    return Completion(text, e.ids, e.logps, e.finish or "tokens", e.env.score(), e.mask, e.turns)
