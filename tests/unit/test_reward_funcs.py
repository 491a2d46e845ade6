"""TRL reward functions called as TRL calls them: keywords, columns, conversational completions,
None as "not applicable", weights, errors in worker processes, and config validation."""

from __future__ import annotations

import json

import pytest

from rlvr import config as config_mod
from rlvr.data import row_to_problem
from rlvr.errors import ConfigError
from rlvr.types import Problem
from rlvr.verifiers.base import CallableVerifier
from rlvr.verifiers.reward_funcs import RewardFunctionsVerifier
from rlvr.verifiers.trl_call import combine, trl_kwargs

REWARDS_FILE = '''
import time
def exact(prompts, completions, completion_ids, answer, **kwargs):
    return [1.0 if c.strip() == a else 0.0 for c, a in zip(completions, answer)]
def only_short(completions, **kwargs):
    return [None if len(c) > 3 else 0.5 for c in completions]
def boom(completions, **kwargs):
    raise RuntimeError("bad user code")
def wrong_length(completions, **kwargs):
    return [1.0]
def slow(completions, **kwargs):
    time.sleep(30)
'''


def _problem(prompt="2+2=", answer="4", **extra):
    row = {"prompt": prompt, "answer": answer, **extra}
    return row_to_problem(row, "data.jsonl:1", 0, "reward_funcs")


def test_called_with_trl_keywords_and_columns_under_their_own_names():
    seen = {}

    def f(prompts, completions, completion_ids, answer, difficulty, **kwargs):
        seen.update(kwargs, prompts=prompts, completions=completions, ids=completion_ids,
                    answer=answer, difficulty=difficulty)
        return [float(len(c)) for c in completions]

    p = _problem(difficulty=3)
    scores = CallableVerifier(f).score_batch(["4", "44"], [p, p], token_ids=[[7], [7, 7]])
    assert [s.reward for s in scores] == [1.0, 2.0]
    assert seen["prompts"] == ["2+2=", "2+2="] and seen["completions"] == ["4", "44"]
    assert seen["ids"] == [[7], [7, 7]] and seen["answer"] == ["4", "4"] and seen["difficulty"] == [3, 3]
    assert {"trainer_state", "log_extra", "log_metric"} <= set(seen)
    assert "source" not in seen and "reference_column" not in seen   # rlvr's own bookkeeping


def test_conversational_prompts_get_message_completions():
    p = Problem("c", [{"role": "user", "content": "hi"}], reference="x")
    kw = trl_kwargs(["hello"], [p])
    assert kw["completions"] == [[{"role": "assistant", "content": "hello"}]]
    assert kw["prompts"] == [[{"role": "user", "content": "hi"}]] and kw["reference"] == ["x"]


def test_none_is_not_applicable_like_trl_nansum():
    # TRL: (rewards_per_func * weights).nansum(dim=1); a row where every function says None stays None.
    assert combine([[1.0, None, None], [0.5, 2.0, None]], [2.0, 1.0]) == [2.5, 2.0, None]
    scores = CallableVerifier(lambda completions, **_: [None, 1.0]).score_batch(["a", "b"], [_problem()] * 2)
    assert (scores[0].reward, scores[0].flags) == (0.0, ("unscorable",)) and scores[1].correct


def test_file_module_and_builtin_terms_weighted_in_workers(tmp_path, monkeypatch):
    (tmp_path / "my_rewards.py").write_text(REWARDS_FILE)
    monkeypatch.chdir(tmp_path)
    v = RewardFunctionsVerifier(terms=[
        {"fn": "my_rewards.py:exact", "weight": 2.0},
        {"fn": f"{tmp_path / 'my_rewards.py'}:only_short", "name": "short"},
        {"verifier": "arithmetic", "weight": 0.25}])
    try:
        p = Problem("1", "2+2=", reference="4", verifier="reward_funcs",
                    metadata={"reference_column": "answer"})
        s = v.score_batch(["4", "> 4", "5555"], [p] * 3, token_ids=[[1], [1, 2], [1, 2, 3, 4]])
        assert [x.reward for x in s] == [2.0 + 0.5, 0.5 + 0.25, 0.0]
        assert s[2].details["terms"] == {"exact": 0.0, "short": None, "arithmetic": 0.0}
        assert [x.correct for x in s] == [True, False, False]   # the first term decides
    finally:
        v.close()


def test_user_code_that_raises_misbehaves_or_hangs_costs_only_its_term(tmp_path, monkeypatch):
    (tmp_path / "my_rewards.py").write_text(REWARDS_FILE)
    monkeypatch.chdir(tmp_path)
    v = RewardFunctionsVerifier(terms=[
        {"fn": "my_rewards.py:exact"}, {"fn": "my_rewards.py:boom"},
        {"fn": "my_rewards.py:wrong_length"}, {"fn": "my_rewards.py:slow", "timeout_s": 1.0}])
    try:
        p = Problem("1", "q", reference="4", metadata={"reference_column": "answer"})
        s = v.score_batch(["4", "3"], [p, p])
        assert [x.reward for x in s] == [1.0, 0.0]
        assert set(s[0].flags) == {"crash", "timeout"}
        assert "bad user code" in s[0].details["error"] and "2 completions" in s[0].details["error"]
    finally:
        v.close()


def test_unloadable_function_is_a_config_error_naming_the_key(tmp_path, monkeypatch):
    from rlvr.training.setup import build_reward_funcs

    monkeypatch.chdir(tmp_path)
    (tmp_path / "r.py").write_text("def f(completions, **kw):\n    return [0.0] * len(completions)\n")
    cfg = config_mod.load(None, ["data.task=", "data.train_path=x.jsonl",
                                 "data.reward_funcs=[{fn: 'r.py:f'}, {fn: 'r.py:nope'}]"])
    with pytest.raises(ConfigError, match=r"data.reward_funcs\[1\].fn: cannot load 'r.py:nope'.*nope"):
        build_reward_funcs(cfg)


@pytest.mark.parametrize("value,message", [
    ("[{fn: 'nocolon'}]", r"data.reward_funcs\[0\].fn: 'nocolon' must look like module:function"),
    ("[{fn: 'a:b', weight: 'x'}]", r"data.reward_funcs\[0\].weight must be a finite number"),
    ("[{fn: 'a:b', verifier: math}]", r"data.reward_funcs\[0\]: give exactly one of"),
    ("[{verifier: math}, {fn: 'a:b', wieght: 2}]", r"data.reward_funcs\[1\].wieght: unknown key"),
    ("[3]", r"data.reward_funcs\[0\]; expected a mapping"),
])
def test_config_shape_is_validated_with_the_key_named(value, message):
    with pytest.raises(ConfigError, match=message):
        config_mod.load(None, [f"data.reward_funcs={value}"])


def test_reward_funcs_is_the_default_verifier_of_rows_that_name_none(tmp_path, monkeypatch):
    from rlvr.training.setup import build_problems

    monkeypatch.chdir(tmp_path)
    (tmp_path / "r.py").write_text("def f(completions, solution, **kw):\n"
                                   "    return [float(c == s) for c, s in zip(completions, solution)]\n")
    (tmp_path / "d.jsonl").write_text(json.dumps({"prompt": "1+1=", "solution": "2"}) + "\n"
                                      + json.dumps({"prompt": "1+2=", "answer": "3", "verifier": "arithmetic"}) + "\n")
    cfg = config_mod.load(None, ["data.task=", "data.train_path=d.jsonl",
                                 "data.reward_funcs=[{fn: 'r.py:f'}]"])
    verifiers, train, _, _ = build_problems(cfg)
    try:
        assert [p.verifier for p in train] == ["reward_funcs", "arithmetic"]
        assert [s.reward for s in verifiers["reward_funcs"].score_batch(["2", "3"], [train[0]] * 2)] == [1.0, 0.0]
    finally:
        verifiers["reward_funcs"].close()
