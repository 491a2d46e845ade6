"""Generation controls (`rollout.stop`, `min_p`, `repetition_penalty`, `generation_kwargs`): stop
strings on the in-process engine, and the config's refusal of controls that would break the
behaviour-policy contract (min-p's contract is tested in test_behaviour_contract.py)."""

from __future__ import annotations

import pytest
import torch

from rlvr import config
from rlvr.errors import ConfigError
from rlvr.models.tiny import build_model
from rlvr.rollout.base import SamplingParams
from rlvr.rollout.hf import HFEngine
from rlvr.tasks.arithmetic import make_problem

PROBLEMS = [make_problem(12, 345, "+"), make_problem(7, 8, "+"), make_problem(40, 2, "+")]


@pytest.fixture(scope="module")
def engine():
    torch.set_num_threads(1)
    model, tokenizer = build_model(seed=3, hidden=32, layers=2, heads=4, mlp=64)
    return HFEngine(model.eval(), tokenizer)


def _expected(completion, stop: str, tokenizer, include: bool):
    """The row cut by a token-by-token scan (the oracle; the engine binary-searches)."""
    for k in range(1, len(completion.token_ids) + 1):
        text = tokenizer.decode(completion.token_ids[:k], skip_special_tokens=True)
        if stop in text:
            at = text.index(stop)
            return (completion.token_ids[:k], completion.logprobs[:k], "stop",
                    text[:at + len(stop)] if include else text[:at])
    return completion.token_ids, completion.logprobs, completion.finish_reason, completion.text


@pytest.mark.parametrize("include", [False, True])
def test_stop_strings_end_rows_after_the_completing_token(engine, include):
    params = SamplingParams(temperature=1.5, max_new_tokens=24)
    free = engine.generate(PROBLEMS, 6, params, seed=5)
    stop = "1"
    cut = engine.generate(PROBLEMS, 6, SamplingParams(temperature=1.5, max_new_tokens=24, stop=(stop, "xyz"),
                                                      include_stop_str=include), seed=5)
    hits = 0
    for g_free, g_cut in zip(free, cut):
        for a, b in zip(g_free.completions, g_cut.completions):
            want = _expected(a, stop, engine.tokenizer, include)
            assert (b.token_ids, b.logprobs, b.finish_reason, b.text) == want
            hits += stop in a.text
    assert hits >= 3   # the stop string really occurs in the sampled rows


def _cfg(*overrides):
    return config.load(None, ["data.task=arithmetic", *overrides])


@pytest.mark.parametrize("overrides, match", [
    (["rollout.repetition_penalty=1.2"], r"rollout.repetition_penalty: the hf engine does not apply it"),
    (["rollout.engine=vllm", "rollout.repetition_penalty=1.2"],
     r"rollout.repetition_penalty: it changes the distribution.*grpo.is_correction=token"),
    (["rollout.engine=vllm", "grpo.is_correction=token", "rollout.generation_kwargs={seed: 1}"],
     r"rollout.generation_kwargs.seed: set by rlvr itself"),
    (["rollout.engine=vllm", "rollout.generation_kwargs={presence_penalty: 0.5}"],
     r"rollout.generation_kwargs: it changes the distribution"),
])
def test_controls_that_break_the_contract_are_refused_by_name(overrides, match):
    """Refused before anything is written: at load, or by the combination checks a run opens with
    (which engines apply history-shaped controls is the engine table's `history_controls`)."""
    from rlvr.config.checks import check_combinations
    from rlvr.rollout.engines import capabilities

    with pytest.raises(ConfigError, match=match):
        cfg = _cfg(*overrides)
        check_combinations(cfg, cfg.rollout.engine, False, capabilities())


def test_controls_that_keep_the_contract_load():
    cfg = _cfg("rollout.min_p=0.05", "rollout.stop=[</answer>]", "rollout.include_stop_str=true")
    assert (cfg.rollout.min_p, cfg.rollout.stop) == (0.05, ("</answer>",))
    cfg = _cfg("rollout.engine=vllm", "grpo.is_correction=token", "rollout.repetition_penalty=1.1")
    assert cfg.rollout.repetition_penalty == 1.1


def test_vllm_keywords_carry_only_what_is_set():
    from rlvr.rollout.vllm.engine import more_kwargs

    assert more_kwargs(SamplingParams()) == {}
    assert more_kwargs(SamplingParams(min_p=0.1, repetition_penalty=1.1, stop=("</a>",),
                                      extra=(("presence_penalty", 0.5),))) == {
        "min_p": 0.1, "repetition_penalty": 1.1, "stop": ["</a>"], "include_stop_str_in_output": False,
        "presence_penalty": 0.5}
