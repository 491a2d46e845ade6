"""GDPO (`grpo.reward_norm: per_term`): hand-computed advantages, and parity with TRL's own code."""

import inspect
import math
import textwrap

import pytest
import torch

from rlvr.algo.advantages import decoupled_advantages, group_advantages

torch.set_num_threads(1)


def test_per_term_normalisation_stops_a_wide_term_drowning_correctness():
    # correctness [1, 0] and a length term [-10, 0]: summed, the length term decides (the right
    # answer is pushed down); normalised per term, each contributes ±1 and they cancel
    terms = torch.tensor([[[1.0, -10.0], [0.0, 0.0]]])                 # [P=1, G=2, K=2]
    summed = group_advantages(terms.sum(dim=2), "group", eps=0.0)
    torch.testing.assert_close(summed, torch.tensor([[-1.0, 1.0]]))
    per_term = decoupled_advantages(terms, torch.tensor([1.0, 1.0]), eps=0.0)
    assert (per_term == 0).all()


def test_weights_apply_after_normalisation_then_batch_whitening():
    # group 0: correctness [1, 0] -> z [1, -1]; format [1, 1] is constant -> 0; s = [1, -1]
    # group 1: correctness [0, 0] -> 0; format [1, 0] -> z [1, -1], weight 0.5; s = [0.5, -0.5]
    # batch s {1, -1, .5, -.5}: mean 0, population variance 0.625 -> A = s / sqrt(5/8)
    terms = torch.tensor([[[1.0, 1.0], [0.0, 1.0]], [[0.0, 1.0], [0.0, 0.0]]])
    adv = decoupled_advantages(terms, torch.tensor([1.0, 0.5]), eps=0.0)
    k = math.sqrt(8 / 5)
    torch.testing.assert_close(adv, torch.tensor([[k, -k], [0.5 * k, -0.5 * k]]))


def test_terms_that_did_not_apply_are_left_out():
    # the third completion has no term at all: out of every statistic, advantage 0
    nan = math.nan
    terms = torch.tensor([[[1.0, 1.0], [0.0, 1.0], [nan, nan]]])
    adv = decoupled_advantages(terms, torch.tensor([1.0, 1.0]), eps=0.0)
    torch.testing.assert_close(adv, torch.tensor([[1.0, -1.0, 0.0]]))


def test_constant_groups_get_exactly_zero():
    terms = torch.tensor([[[0.3, 1.0], [0.3, 1.0], [0.3, 1.0]], [[1.0, 0.0], [0.0, 0.5], [1.0, 1.0]]])
    adv = decoupled_advantages(terms, torch.tensor([1.0, 0.2]))
    assert (adv[0] == 0).all() and (adv[1] != 0).all()


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError, match=r"\[P, G, K\]"):
        decoupled_advantages(torch.zeros(2, 3), torch.ones(3))
    with pytest.raises(ValueError, match="weights"):
        decoupled_advantages(torch.zeros(2, 3, 2), torch.ones(3))


def _trl_normalize_then_sum(rewards_per_func, weights, num_generations):
    """TRL's own `normalize_then_sum` branch of `GRPOTrainer._generate_and_score_completions`,
    cut from the installed source and run on our tensors (the branch is not a function of its own)."""
    from trl.trainer import grpo_trainer

    source = inspect.getsource(grpo_trainer.GRPOTrainer._generate_and_score_completions)
    head = 'elif self.multi_objective_aggregation == "normalize_then_sum":\n'
    start = source.index(head) + len(head)
    body = textwrap.dedent(source[start:source.index("        else:\n", start)])
    trainer = type("T", (), {"reward_funcs": [None] * len(weights), "reward_weights": weights})()
    scope = {"self": trainer, "rewards_per_func": rewards_per_func, "device": "cpu",
             "num_generations": num_generations, "nanstd": grpo_trainer.nanstd, "torch": torch,
             "unscorable_mask": torch.isnan(rewards_per_func).all(dim=1)}
    exec(compile(body, "trl:normalize_then_sum", "exec"), scope)  # noqa: S102 - TRL's code, pinned by import
    return scope["advantages"]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_parity_with_trl_normalize_then_sum(seed):
    pytest.importorskip("trl")
    g = torch.Generator().manual_seed(seed)
    p, n, k = 4, 8, 3
    correct = torch.randint(0, 2, (p, n, 1), generator=g).float()
    fmt = torch.rand(p, n, 1, generator=g).round(decimals=1)
    length = -torch.randint(0, 40, (p, n, 1), generator=g).float()
    terms = torch.cat([correct, fmt, length], dim=2)                  # [P, G, K]
    weights = torch.tensor([1.0, 0.1, 0.5])
    ours = decoupled_advantages(terms, weights)
    theirs = _trl_normalize_then_sum(terms.reshape(p * n, k), weights, n).view(p, n)
    # TRL divides by n - 1 (stds) and adds 1e-4; the docstring's conversion, to the eps terms
    torch.testing.assert_close(ours * math.sqrt((p * n - 1) / (p * n)), theirs, atol=2e-3, rtol=2e-3)


def _group(verifier, texts, reference="12"):
    from rlvr.types import Completion, Group, Problem

    problem = Problem("p", "1+11=", reference, "composite")
    group = Group(problem, [1], [Completion(t, [1] * (i + 1), [0.0], "stop") for i, t in enumerate(texts)])
    for c, s in zip(group.completions, verifier.score_batch(texts, [problem] * len(texts))):
        c.score = s
    return group


def test_terms_and_weights_reach_the_advantages():
    from rlvr.training.state import per_term_advantages
    from rlvr.verifiers.compose import CompositeVerifier, reward_terms

    v = CompositeVerifier(terms=[{"verifier": "arithmetic"},
                                 {"verifier": "length_budget", "weight": 0.5, "options": {"budget": 1}}])
    groups = [_group(v, [">12", "a b >12", ">13"]), _group(v, [">7", "x >12", ">12"])]
    terms, weights = reward_terms(groups)
    assert weights == [1.0, 0.5]
    assert terms[0] == [[1.0, 0.0], [1.0, -1.0], [0.0, 0.0]]
    expected = decoupled_advantages(torch.tensor(terms), torch.tensor(weights))
    torch.testing.assert_close(per_term_advantages(groups), expected)


def test_terms_without_weights_are_refused():
    from rlvr.types import Completion, Group, Problem, Score
    from rlvr.verifiers.compose import reward_terms

    c = Completion("x", [1], [0.0], "stop", score=Score(1.0, True, details={"terms": {"a": 1.0}}))
    with pytest.raises(ValueError, match="without their weights"):
        reward_terms([Group(Problem("p", "q"), [1], [c])])


def test_per_term_needs_group_advantage():
    from rlvr import config
    from rlvr.errors import ConfigError

    with pytest.raises(ConfigError, match="grpo.advantage=group"):
        config.load(None, ["grpo.reward_norm=per_term", "grpo.advantage=rloo"])
