"""reasoning-gym as a task source: weighted draws, a held-out split that shares no question with
training draws, scoring in workers (binary by default), and the scorer audit. Skipped without
reasoning-gym installed."""

from __future__ import annotations

import random

import pytest

pytest.importorskip("reasoning_gym")

from rlvr import config as config_mod  # noqa: E402
from rlvr.errors import ConfigError  # noqa: E402
from rlvr.tasks import rgym  # noqa: E402
from rlvr.tasks.rgym import ReasoningGymTask, audit, parse_spec  # noqa: E402

SMALL = {"basic_arithmetic": {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1,
                              "operators": ["+"], "allow_parentheses": False, "allow_negation": False}}


def test_spec_parsing_and_errors_name_the_key():
    assert parse_spec("reasoning_gym:a=2,b") == [("a", 2.0), ("b", 1.0)]
    with pytest.raises(ConfigError, match="data.task"):
        parse_spec("reasoning_gym:a=-1")
    with pytest.raises(ConfigError, match="unknown reasoning-gym task 'nope'"):
        ReasoningGymTask("reasoning_gym:nope")
    with pytest.raises(ConfigError, match="data.task_options.gcd: not a task named"):
        ReasoningGymTask("reasoning_gym:basic_arithmetic", {"gcd": {}})


def test_weighted_draws_and_heldout_disjoint_by_question():
    task = ReasoningGymTask("reasoning_gym:basic_arithmetic=3,gcd", SMALL, seed=0, heldout_size=40)
    held = task.heldout(40)
    assert [p.verifier for p in held].count("rg.gcd") == 20 and len({p.prompt for p in held}) == 40
    train = task.sample(random.Random(0), 400)
    share = sum(p.verifier == "rg.basic_arithmetic" for p in train) / len(train)
    assert 0.68 < share < 0.82                                   # weight 3 : 1
    # 1-digit sums have few distinct questions: many draws would collide with the held-out set.
    assert not {p.prompt for p in train} & {p.prompt for p in held}
    assert task.sample(random.Random(5), 3)[0].id == task.sample(random.Random(5), 3)[0].id


def test_scorer_runs_in_workers_binary_by_default():
    task = ReasoningGymTask("reasoning_gym:basic_arithmetic", SMALL, heldout_size=4)
    p = task.heldout(1)[0]
    verifier = task.verifiers()["rg.basic_arithmetic"]
    gold = str(p.reference)
    try:
        s = verifier.score_batch([f"<answer>{gold}</answer>", f"{gold}", f"<answer>1{gold}</answer>", ""],
                                 [p] * 4)
    finally:
        verifier.close()
    assert [x.reward for x in s] == [1.0, 1.0, 0.0, 0.0]       # "1<gold>" earns partial credit in rg
    assert s[0].correct and not s[2].correct and s[3].flags == ("no_answer",)


def test_audit_refuses_a_scorer_that_rewards_any_string(monkeypatch):
    from reasoning_gym.arithmetic.basic_arithmetic import BasicArithmeticDataset

    sound = audit("basic_arithmetic", SMALL["basic_arithmetic"], n=10)
    assert {k: v for k, v in sound.items() if k != "partial_credit"} == {
        "gold": 0, "empty": 0, "junk": 0, "wrong": 0}
    monkeypatch.setattr(BasicArithmeticDataset, "score_answer", lambda self, a, e: 1.0 if a else 0.0)
    with pytest.raises(ConfigError, match=r"fails its own audit.*junk: 30"):
        rgym.check_sound("basic_arithmetic", SMALL["basic_arithmetic"])


def test_config_reaches_the_task():
    from rlvr.training.setup import build_problems

    cfg = config_mod.load(None, ["data.task=reasoning_gym:basic_arithmetic,gcd", "data.heldout_size=6",
                                 "data.task_options={basic_arithmetic: {max_digits: 1}}"])
    verifiers, train, heldout, task = build_problems(cfg)
    assert sorted(verifiers) == ["rg.basic_arithmetic", "rg.gcd"] and len(heldout) == 6 and train == []
    assert task.trace(heldout[0]) == f"<answer>{heldout[0].reference}</answer>"


def test_task_whose_questions_are_all_heldout_is_refused():
    # caesar_cipher on one 3-letter word with rotation 1 has a few dozen questions: a held-out
    # split of 200 swallows them all, so training would never draw one (alone: forever).
    opts = {"caesar_cipher": {"min_words": 1, "max_words": 1, "min_rotation": 1, "max_rotation": 1}}
    with pytest.raises(ConfigError, match="'caesar_cipher' has too few distinct questions"):
        ReasoningGymTask("reasoning_gym:caesar_cipher", opts, heldout_size=200)
