"""EpisodeEngine / episode_verifier: episodes behind the engine seam, scored by the environment;
`score_groups` keeps those scores (and refuses an unscored episode), with a scripted engine (no
sandbox)."""

from __future__ import annotations

import pytest

from rlvr.agents.engine import EpisodeEngine, episode_verifier
from rlvr.agents.env import Step
from rlvr.agents.episode import Budget
from rlvr.evaluation.metrics import score_groups
from rlvr.models.tiny import CHARS, build_tokenizer
from rlvr.rollout.base import EngineScored, PromptEncoder, SamplingParams
from rlvr.tasks.agentic import EXTRA_CHARS, make_problem
from rlvr.types import Completion, Group, Score

TOK = build_tokenizer(CHARS + list(EXTRA_CHARS))


class Scripted:
    """An engine whose turn i of every episode is `turns[i]` (log-prob -0.5 per token)."""

    def __init__(self, turns):
        self.turns, self.calls, self.pad_id, self.version = turns, 0, TOK.pad_token_id, 7
        self.model, self.loaded, self.prompts = "model", None, PromptEncoder(TOK)

    def continue_ids(self, prefixes, params, gen):
        ids = TOK(self.turns[self.calls], add_special_tokens=False)["input_ids"] + [TOK.eos_token_id]
        self.calls += 1
        return [(ids, [-0.5] * len(ids), "stop") for _ in prefixes]

    def load_weights(self, policy, version=0):
        self.loaded, self.version = policy, version


class CountingEnv:
    """Scores an episode by the number of tool calls it made (distinct per episode length)."""

    def __init__(self):
        self.steps, self.closed = 0, False

    def reset(self, problem):
        self.steps = 0

    def step(self, call):
        self.steps += 1
        return Step("ok")

    def score(self):
        return Score(float(self.steps), self.steps == 2, ("tamper_attempt",) if self.steps > 2 else ())

    def close(self):
        self.closed = True


def test_episodes_are_scored_by_their_environment_and_keep_that_score():
    problems = [make_problem(1, 2), make_problem(3, 4)]
    envs = []

    def make_env(p):
        envs.append(CountingEnv())
        return envs[-1]

    engine = EpisodeEngine(Scripted(["calc:1", "run:", ""]), TOK, make_env, Budget(4, 80, 24))
    groups = engine.generate(problems, 3, SamplingParams(), seed=11)
    assert [(g.policy_version, g.seed) for g in groups] == [(7, 11), (7, 11)]
    assert len(envs) == 6 and all(e.closed for e in envs)
    assert [c.score for g in groups for c in g.completions] == [Score(2.0, True)] * 6
    score_groups(groups, {"workspace": episode_verifier()})   # Run.verify: scores stay as set
    assert [c.score for g in groups for c in g.completions] == [Score(2.0, True)] * 6
    assert all(c.loss_mask is not None and c.turns == 3 for g in groups for c in g.completions)


def test_an_episode_without_its_engines_score_is_an_error_not_a_zero():
    p = make_problem(1, 2)
    scored, unscored = Completion("", [1, 2], [], "stop", Score(1.0, True)), Completion("", [1], [], "stop")
    with pytest.raises(RuntimeError, match="1 of 2 completions carry no score"):
        score_groups([Group(p, [], [scored, unscored])], {"workspace": episode_verifier()})
    with pytest.raises(RuntimeError, match="scored by their engine"):
        EngineScored("workspace").score_batch(["x"], [p])


def test_verifier_checks_workspace_references():
    verifier = episode_verifier()
    assert isinstance(verifier, EngineScored) and verifier.name == "workspace"
    with pytest.raises(ValueError, match="tests"):
        verifier.check_reference(make_problem(1, 2).__class__("x", "1+2", reference={}))


def test_engine_delegates_weights_and_closes_its_environments_owner():
    closed = []
    inner = Scripted([""])
    inner.close = lambda: closed.append("inner")
    engine = EpisodeEngine(inner, TOK, lambda p: CountingEnv(), Budget(),
                           on_close=lambda: closed.append(1))
    engine.load_weights("policy", 3)
    assert inner.loaded == "policy" and engine.version == 3 and engine.model == "model"
    engine.close()
    assert closed == ["inner", 1]
