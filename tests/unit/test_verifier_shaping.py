"""Shaping terms with hand-computed values, and composition / routing of verifiers."""

from __future__ import annotations

import pytest

from rlvr.types import Problem
from rlvr.verifiers.base import CallableVerifier
from rlvr.verifiers.compose import CompositeVerifier, RoutingVerifier, as_verifier
from rlvr.verifiers.format import FormatVerifier
from rlvr.verifiers.shaping import (language_consistency, length_budget_penalty, length_budget_verifier,
                                    overlong_verifier, soft_overlong_penalty)


@pytest.mark.parametrize("length,expected", [(0, 0.0), (80, 0.0), (90, -0.5), (100, -1.0), (101, -1.0)])
def test_soft_overlong_penalty_dapo(length, expected):
    # max 100, cache 20: free up to 80, then (80 - L) / 20, then -1.
    assert soft_overlong_penalty(length, 100, 20) == pytest.approx(expected)


def test_length_budget_penalty():
    assert length_budget_penalty(100, 100) == 0.0
    assert length_budget_penalty(150, 100) == pytest.approx(-0.5)
    assert length_budget_penalty(150, 100, slope=0.2) == pytest.approx(-0.1)
    assert length_budget_penalty(1000, 100) == -1.0


def test_language_consistency_reads_the_reasoning_only():
    assert language_consistency("<think>abcd еёжз</think>ANSWER", "en") == pytest.approx(0.5)
    assert language_consistency("<think>我们计算一下</think> 3", "zh") == 1.0
    assert language_consistency("<think>1 + 2 = 3</think>", "fr") == 1.0  # no letters: nobody's


def test_shaping_verifiers_use_problem_overrides():
    problems = [Problem("a", ""), Problem("b", "", metadata={"length_budget": 2})]
    scores = length_budget_verifier(budget=4).score_batch(["w w w w", "w w w w"], problems)
    assert [s.reward for s in scores] == [0.0, -1.0] and not any(s.correct for s in scores)
    assert overlong_verifier(max_length=3, cache_length=1).score_batch(["a b c d"], problems[:1])[0].reward == -1.0


def test_composite_weights_terms_and_keeps_correct_from_the_primary():
    trl_reward = lambda completions, **columns: [0.5 for _ in completions]  # noqa: E731
    composite = CompositeVerifier(terms=[
        {"verifier": "format", "weight": 0.1},
        {"verifier": trl_reward, "weight": 2.0, "primary": True},
        {"verifier": overlong_verifier(max_length=4, cache_length=2), "weight": 1.0},
    ])
    responses = ["<think>a b</think> <answer>1</answer>", "one two three four five"]
    scores = composite.score_batch(responses, [Problem("p", "")] * 2)
    # good format: 0.1*1 + 2*0.5 + 1*(-0.5) [3 words: (2-3)/2]; bad: 0 + 1 + (-1) [5 words]
    assert [s.reward for s in scores] == pytest.approx([0.6, 0.0])
    assert all(s.correct for s in scores)  # the TRL callable is primary and its 0.5 > 0
    assert scores[1].flags == ("bad_format",)
    assert scores[0].details["terms"] == {"format": 1.0, "<lambda>": 0.5, "overlong": -0.5}


def test_as_verifier_accepts_instances_names_and_callables():
    fmt = FormatVerifier()
    assert as_verifier(fmt) is fmt
    assert as_verifier("format").name == "format"
    assert isinstance(as_verifier(lambda completions, **kw: [1.0] * len(completions)), CallableVerifier)
    with pytest.raises(TypeError):
        as_verifier(3)


def test_router_sends_each_problem_to_its_verifier_in_one_batch_each():
    calls = []

    def count_words(completions, **columns):
        calls.append(len(completions))
        return [float(len(c.split())) for c in completions]

    router = RoutingVerifier(verifiers={"words": count_words})
    problems = [Problem("a", "", verifier="format"), Problem("b", "", verifier="words"),
                Problem("c", "", verifier="words"), Problem("d", "", verifier="nope")]
    scores = router.score_batch(["<think>x</think><answer>1</answer>", "a b", "a b c", "x"], problems)
    assert [s.reward for s in scores] == [1.0, 2.0, 3.0, 0.0]
    assert calls == [2] and scores[3].flags == ("unknown_verifier",)
    with pytest.raises(ValueError, match="problem d"):
        router.check_reference(problems[3])


def test_overlong_counts_the_sampled_tokens_through_training_scoring():
    from rlvr.evaluation.metrics import score_groups
    from rlvr.types import Completion, Group, Problem
    from rlvr.verifiers.compose import CompositeVerifier, RoutingVerifier
    from rlvr.verifiers.reward_funcs import RewardFunctionsVerifier

    # one word, 6 tokens: over a 4-token budget (−1) although 1 word is well inside it
    long = Completion("aaaaaa", [5] * 6, [-1.0] * 6, "length")
    short = Completion("a a a", [5] * 3, [-1.0] * 3, "stop")   # 3 tokens: 2 − 3 = −1 of cache 2 → −0.5
    options = {"max_length": 4, "cache_length": 2}
    composite = CompositeVerifier(terms=[{"verifier": "overlong", "options": options}])
    router = RoutingVerifier(verifiers={"overlong": composite})
    terms = RewardFunctionsVerifier(terms=[{"verifier": "overlong", "options": options}])
    for verifier in (overlong_verifier(**options), composite, router, terms):
        group = Group(Problem("p", "x", verifier="overlong"), [1], [long, short])
        score_groups([group], {"overlong": verifier})
        assert [c.score.reward for c in group.completions] == [-1.0, -0.5], verifier
    # without ids (a direct call) the text's words are counted, as before
    assert [s.reward for s in overlong_verifier(**options).score_batch(["aaaaaa"], [None])] == [0.0]
