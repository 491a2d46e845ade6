"""The built-in agentic task: splits, the extended tiny tokenizer, and the SFT layout == RL layout."""

from __future__ import annotations

import random

from rlvr.agents.env import Step
from rlvr.agents.episode import Budget, run_episodes
from rlvr.agents.cold_start import episode_tokens
from rlvr.models.tiny import CHARS, SPECIALS, build_tokenizer
from rlvr.rollout.base import SamplingParams
from rlvr.tasks.agentic import EXTRA_CHARS, AgenticTask
from rlvr.types import Score


def test_agentic_chars_keep_default_ids():
    base, ext = build_tokenizer(), build_tokenizer(CHARS + list(EXTRA_CHARS))
    assert len(base) == len(SPECIALS) + len(CHARS)
    assert len(ext) == len(base) + len(set(EXTRA_CHARS))
    text = "347+285=7+5+0=12|>632"
    assert base(text)["input_ids"] == ext(text)["input_ids"]
    assert ext.decode(ext("write:answer=632", add_special_tokens=False)["input_ids"]) == "write:answer=632"


def test_splits_are_disjoint():
    task = AgenticTask(3)
    held = {p.id for p in task.heldout(50)}
    train = {p.id for p in task.sample(random.Random(0), 300)}
    assert len(held) == 50 and not held & train


class Scripted:
    """An engine that 'samples' the reasoner's turns (log-prob 0), for layout checks."""

    def __init__(self, tok, turns_per_episode):
        self.tok, self.turns, self.calls, self.pad_id = tok, turns_per_episode, 0, tok.pad_token_id

    def continue_ids(self, prefixes, params, gen):
        rows = []
        for i, _ in enumerate(prefixes):
            text = self.turns[i][self.calls][0]
            ids = self.tok(text, add_special_tokens=False)["input_ids"] + [self.tok.eos_token_id]
            rows.append((ids, [0.0] * len(ids), "stop"))
        self.calls += 1
        return rows


class ReplayEnv:
    def __init__(self, turns):
        self.obs = [o for _, o in turns if o is not None]

    def reset(self, problem):
        self.i = 0

    def step(self, call):
        self.i += 1
        return Step(self.obs[self.i - 1])

    def score(self):
        return Score(1.0, True)

    def close(self):
        pass


def test_reasoner_layout_equals_sampled_layout():
    tok = build_tokenizer(CHARS + list(EXTRA_CHARS))
    task = AgenticTask(3)
    problems = task.sample(random.Random(1), 2)
    for tamper in (False, True):
        turns = [task.episode(p, tamper) for p in problems]
        envs = iter([ReplayEnv(t) for t in turns])
        groups = run_episodes(Scripted(tok, turns), tok, problems, 1, lambda p: next(envs),
                              SamplingParams(), 0, Budget(max_turns=5, max_tokens=80))
        for g, t in zip(groups, turns):
            c = g.completions[0]
            assert c.finish_reason == "stop" and c.turns == len(t)
            assert (c.token_ids, c.loss_mask) == episode_tokens(tok, t)
