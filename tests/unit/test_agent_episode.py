"""Multi-turn episodes: tokens trained == tokens sampled (+ the environment's encoded ids), the
environment's tokens get no gradient, finish reasons, and the tool-call formats."""

from __future__ import annotations


import pytest
import torch

from rlvr.agents.calls import PlainFormat, QwenFormat, choose_format
from rlvr.agents.env import Step, ToolCall
from rlvr.agents.episode import Budget, episode_metrics, run_episodes
from rlvr.models.tiny import CHARS, build_model
from rlvr.rollout.base import SamplingParams
from rlvr.rollout.hf import HFEngine
from rlvr.tasks.agentic import EXTRA_CHARS
from rlvr.models.batch import build_batch
from rlvr.types import Problem, Score


class EchoEnv:
    """Answers every call with a fixed text; ends the episode after `end_after` calls (0: never)."""

    def __init__(self, answer: str = "12+3", end_after: int = 0):
        self.answer, self.end_after, self.calls, self.closed = answer, end_after, 0, False

    def reset(self, problem):
        self.calls = 0

    def step(self, call):
        self.calls += 1
        return Step(self.answer, done=bool(self.end_after) and self.calls >= self.end_after)

    def score(self):
        return Score(float(self.calls % 2), bool(self.calls % 2))

    def close(self):
        self.closed = True


class AlwaysCall:
    """Every model turn is a tool call (so a random model still makes multi-turn episodes)."""

    def parse(self, turn):
        return ToolCall("echo", {"input": turn})

    def render(self, observation):
        return f"[{observation}]"


class SpyEngine:
    """The real HF engine; records every row it returns, in order."""

    def __init__(self, engine):
        self.engine, self.rows, self.pad_id = engine, [], engine.pad_id

    def continue_ids(self, prefixes, params, gen):
        rows = self.engine.continue_ids(prefixes, params, gen)
        self.rows.append((prefixes, rows))
        return rows


@pytest.fixture(scope="module")
def tiny():
    model, tok = build_model(0, chars=CHARS + list(EXTRA_CHARS))
    engine = HFEngine(model, tok)
    # Random weights rarely sample EOS: let a few frequent characters end a turn too, so turns are short.
    engine.eos_ids |= {tok.convert_tokens_to_ids(c) for c in "0123456789"}
    return model, tok, engine


def _episodes(tiny, env_answer="12+3", budget=Budget(max_turns=3, max_tokens=60, turn_tokens=8),
              fmt=None, envs=None):
    model, tok, engine = tiny
    spy = SpyEngine(engine)
    problems = [Problem("a", "12+3"), Problem("b", "7+80")]
    made = envs if envs is not None else []
    make = lambda p: made.append(EchoEnv(env_answer)) or made[-1]  # noqa: E731
    groups = run_episodes(spy, tok, problems, 3, make, SamplingParams(), seed=7, budget=budget,
                          fmt=fmt or AlwaysCall())
    return groups, spy, made


def test_token_ids_are_sampled_ids_plus_encoded_observations(tiny):
    _, tok, _ = tiny
    groups, spy, _ = _episodes(tiny)
    episodes = [c for g in groups for c in g.completions]
    obs = tok("[12+3]", add_special_tokens=False)["input_ids"]
    # Rebuild each episode from what the engine returned, turn by turn (live rows keep their order).
    rebuilt = {i: ([], [], []) for i in range(len(episodes))}
    live = list(range(len(episodes)))
    for prefixes, rows in spy.rows:
        assert len(prefixes) == len(live)
        for i, (tokens, logps, _) in zip(live, rows):
            ids, lps, mask = rebuilt[i]
            assert prefixes[live.index(i)][-len(ids):] == ids or not ids  # the prefix IS the ids so far
            ids += tokens
            lps += logps
            mask += [1] * len(tokens)
            if len(ids) < len(episodes[i].token_ids):
                ids += obs
                lps += [0.0] * len(obs)
                mask += [0] * len(obs)
        live = [i for i in live if len(rebuilt[i][0]) < len(episodes[i].token_ids)]
    assert not live
    turns = [c.turns for c in episodes]
    assert max(turns) >= 2, "the test needs multi-turn episodes"
    for i, c in enumerate(episodes):
        assert c.token_ids == rebuilt[i][0]
        assert c.logprobs == rebuilt[i][1]
        assert c.loss_mask == rebuilt[i][2]
    # What the update trains on is exactly these ids, with the mask on the model's tokens only.
    batch = build_batch(groups, torch.ones(2, 3), tiny[2].pad_id)
    for row, c in enumerate(episodes):
        n = len(c.token_ids)
        assert batch.completion_ids[row, :n].tolist() == c.token_ids
        assert batch.loss_mask[row, :n].tolist() == c.loss_mask
        assert batch.completion_mask[row, :n].tolist() == [1] * n   # env tokens stay attended
        assert batch.loss_mask[row, n:].sum() == 0


def test_environment_tokens_get_no_gradient(tiny, episode_grads):
    model = tiny[0]
    groups, _, _ = _episodes(tiny)
    adv = torch.tensor([[1.0, -0.5, 0.25], [-1.0, 0.75, 0.5]])
    got = episode_grads.by_update(model, build_batch(groups, adv, tiny[2].pad_id))
    model_only = episode_grads.reference(model, groups, adv, lambda c: c.loss_mask)
    every_token = episode_grads.reference(model, groups, adv, lambda c: [1] * len(c.token_ids))
    err = max(float((a - b).abs().max()) for a, b in zip(got, model_only))
    scale = max(float(b.abs().max()) for b in model_only)
    assert err < 1e-4 * scale
    # Training the environment's tokens too would give a clearly different gradient.
    assert max(float((a - b).abs().max()) for a, b in zip(got, every_token)) > 0.05 * scale


def test_finish_reasons_and_envs_closed(tiny):
    envs = []
    groups, _, _ = _episodes(tiny, budget=Budget(max_turns=2, max_tokens=200, turn_tokens=8), envs=envs)
    reasons = {c.finish_reason for g in groups for c in g.completions}
    assert reasons <= {"turns", "tokens"} and "turns" in reasons
    assert all(e.closed for e in envs) and len(envs) == 6
    groups, _, _ = _episodes(tiny, budget=Budget(max_turns=9, max_tokens=12, turn_tokens=8))
    for c in (c for g in groups for c in g.completions):
        assert len(c.token_ids) <= 12 and c.finish_reason == "tokens"
    # A turn that is no tool call ends the episode: "stop".
    groups, _, _ = _episodes(tiny, fmt=PlainFormat())
    assert {c.finish_reason for g in groups for c in g.completions} <= {"stop", "tokens"}
    m = episode_metrics(groups)
    assert abs(m["episodes/finish_stop"] + m["episodes/finish_tokens"] - 1) < 1e-9


def test_env_can_end_episode(tiny):
    model, tok, engine = tiny
    groups = run_episodes(engine, tok, [Problem("a", "1+2")], 2, lambda p: EchoEnv(end_after=1),
                          SamplingParams(), seed=3, budget=Budget(max_turns=5, max_tokens=80),
                          fmt=AlwaysCall())
    for c in groups[0].completions:
        assert c.finish_reason in ("env", "tokens")
        if c.finish_reason == "env":
            assert c.turns == 1 and all(c.loss_mask)    # no observation after the last turn
    assert any(c.finish_reason == "env" for c in groups[0].completions)


def test_same_seed_same_episodes(tiny):
    a, _, _ = _episodes(tiny)
    b, _, _ = _episodes(tiny)
    assert [c.token_ids for g in a for c in g.completions] == [c.token_ids for g in b for c in g.completions]


def test_plain_format():
    f = PlainFormat()
    assert f.parse("calc:1+2") == ToolCall("calc", {"input": "1+2"})
    assert f.parse("write:answer=3") == ToolCall("write", {"input": "answer=3"})
    assert f.parse("") is None and f.parse("12+3") is None and f.parse("Calc:1") is None
    assert f.render("ok") == "[ok]"


def test_qwen_format():
    f = QwenFormat()
    turn = 'Let me add.\n<tool_call>\n{"name": "calc", "arguments": {"expression": "1+2"}}\n</tool_call>'
    assert f.parse(turn) == ToolCall("calc", {"expression": "1+2"})
    assert f.parse("The answer is 3.") is None
    assert f.parse("<tool_call>{not json}</tool_call>").name == "invalid_json"
    assert f.render("3").startswith("\n<|im_start|>user\n<tool_response>\n3\n</tool_response><|im_end|>")

    class T:
        chat_template = "{% if tools %}<tool_call>{% endif %}"
    assert isinstance(choose_format(T()), QwenFormat)
    assert isinstance(choose_format(object()), PlainFormat)
