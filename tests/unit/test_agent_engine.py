"""EpisodeEngine / ScoreLedger / EpisodeVerifier: episodes behind the engine seam, scored by the
environment through the verifier path (`score_groups`), with a scripted engine (no sandbox)."""

from __future__ import annotations

import pytest

from rlvr.agents.engine import EpisodeEngine, EpisodeVerifier, ScoreLedger
from rlvr.agents.env import Step
from rlvr.agents.episode import Budget
from rlvr.evaluation.metrics import score_groups
from rlvr.models.tiny import CHARS, build_tokenizer
from rlvr.rollout.base import SamplingParams
from rlvr.tasks.agentic import EXTRA_CHARS, make_problem
from rlvr.types import Completion, Group, Score

TOK = build_tokenizer(CHARS + list(EXTRA_CHARS))


class Scripted:
    """An engine whose turn i of every episode is `turns[i]` (log-prob -0.5 per token)."""

    def __init__(self, turns):
        self.turns, self.calls, self.pad_id, self.version = turns, 0, TOK.pad_token_id, 7
        self.model, self.loaded = "model", None

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


def test_episodes_are_scored_by_their_environment_through_the_verifier():
    problems = [make_problem(1, 2), make_problem(3, 4)]
    ledger, envs = ScoreLedger(), []

    def make_env(p):
        envs.append(CountingEnv())
        return envs[-1]

    engine = EpisodeEngine(Scripted(["calc:1", "run:", ""]), TOK, make_env, Budget(4, 80, 24), ledger)
    groups = engine.generate(problems, 3, SamplingParams(), seed=11)
    assert [(g.policy_version, g.seed) for g in groups] == [(7, 11), (7, 11)]
    assert len(ledger) == 6 and all(e.closed for e in envs)
    for g in groups:
        for c in g.completions:
            c.score = None       # Run.verify attaches scores: they must come back from the ledger
    score_groups(groups, {"workspace": EpisodeVerifier(ledger)})
    assert len(ledger) == 0
    assert [c.score for g in groups for c in g.completions] == [Score(2.0, True)] * 6
    assert all(c.loss_mask is not None and c.turns == 3 for g in groups for c in g.completions)


def test_ledger_hands_out_scores_per_problem_and_tokens_in_order():
    ledger = ScoreLedger()
    p, q = make_problem(1, 2), make_problem(5, 6)
    s1, s2, s3 = Score(1.0, True), Score(0.0, False, ("tamper_attempt",)), Score(0.5, False)
    ledger.record([Group(p, [], [Completion("", [1, 2], [], "stop", s1),
                                 Completion("", [1, 2], [], "stop", s2)]),
                   Group(q, [], [Completion("", [1, 2], [], "stop", s3)])])
    assert ledger.take(q, [1, 2]) == s3
    assert ledger.take(p, [1, 2]) == s1 and ledger.take(p, [1, 2]) == s2
    assert ledger.take(p, [1, 2]) is None and len(ledger) == 0


def test_verifier_without_an_episode_gives_zero_and_a_flag():
    verifier = EpisodeVerifier(ScoreLedger())
    assert verifier.score_batch(["x"], [make_problem(1, 2)], token_ids=[[3]]) == [
        Score(0.0, False, ("no_episode",))]
    with pytest.raises(ValueError, match="tests"):
        verifier.check_reference(make_problem(1, 2).__class__("x", "1+2", reference={}))


def test_engine_delegates_weights_and_closes_its_environments_owner():
    closed = []
    inner = Scripted([""])
    engine = EpisodeEngine(inner, TOK, lambda p: CountingEnv(), Budget(), ScoreLedger(),
                           on_close=lambda: closed.append(1))
    engine.load_weights("policy", 3)
    assert inner.loaded == "policy" and engine.version == 3 and engine.model == "model"
    engine.close()
    assert closed == [1]
