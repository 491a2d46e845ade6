"""TRL's own reward functions (`trl.rewards`) score the same completions the same under rlvr as under
TRL's `GRPOTrainer._calculate_rewards` (called unbound, on a stand-in trainer) followed by TRL's
weighted `nansum`. Skipped when trl is not installed."""

from __future__ import annotations

import types

import pytest

trl = pytest.importorskip("trl")
torch = pytest.importorskip("torch")

from rlvr.types import Problem  # noqa: E402
from rlvr.verifiers.reward_funcs import RewardFunctionsVerifier  # noqa: E402

COMPLETIONS = [r"<think>x</think>The answer is \boxed{\frac{1}{3}}", r"So \boxed{\frac{1}{2}}",
               "<think>a</think>done", "no answer at all " * 3, r"\boxed{3}", "the the the the the the"]
SOLUTIONS = [r"\frac{1}{3}", r"\frac{1}{3}", "7", "7", "3", r"\text{not math}"]
TERMS = [  # (term for rlvr, the same function as TRL would hold it, weight)
    ({"fn": "trl.rewards:accuracy_reward"}, "accuracy_reward", 1.0),
    ({"fn": "trl.rewards:think_format_reward"}, "think_format_reward", 0.5),
    ({"fn": "trl.rewards:get_soft_overlong_punishment",
      "init": {"max_completion_len": 12, "soft_punish_cache": 6}}, ("get_soft_overlong_punishment",
                                                                    {"max_completion_len": 12, "soft_punish_cache": 6}), 1.0),
    ({"fn": "trl.rewards:get_repetition_penalty_reward", "init": {"ngram_size": 2, "max_penalty": -1.0}},
     ("get_repetition_penalty_reward", {"ngram_size": 2, "max_penalty": -1.0}), 0.3),
]


def _trl_function(spec):
    import trl.rewards as rewards

    if isinstance(spec, str):
        return getattr(rewards, spec)
    return getattr(rewards, spec[0])(**spec[1])


def _trl_scores(prompts, completions, ids, funcs, weights):
    from trl import GRPOTrainer

    stand_in = types.SimpleNamespace(
        accelerator=types.SimpleNamespace(device=torch.device("cpu"), is_main_process=True),
        reward_funcs=funcs,
        reward_processing_classes=[None] * len(funcs), reward_func_names=[f.__name__ for f in funcs],
        state=types.SimpleNamespace(global_step=0), args=types.SimpleNamespace(report_to=[]),
        _log_completion_extra=lambda *a, **k: None, _log_metric=lambda *a, **k: None,
        environments=None)
    inputs = [{"prompt": p, "solution": s} for p, s in zip(prompts, SOLUTIONS)]
    per_func = GRPOTrainer._calculate_rewards(stand_in, inputs, prompts, completions, ids)
    return (per_func * torch.tensor(weights).unsqueeze(0)).nansum(dim=1), per_func


# TRL's accuracy and format rewards read `completion[0]["content"]`: they need message prompts.
@pytest.mark.parametrize("conversational,terms", [(True, TERMS), (False, TERMS[2:])])
def test_trl_rewards_score_the_same_under_rlvr_and_trl(conversational, terms):
    prompt = [{"role": "user", "content": "Solve it."}] if conversational else "Solve it."
    problems = [Problem(str(i), prompt, reference=s, verifier="reward_funcs",
                        metadata={"reference_column": "solution"}) for i, s in enumerate(SOLUTIONS)]
    ids = [list(range(len(c) // 4)) for c in COMPLETIONS]     # 1 token per 4 characters, say
    completions = ([[{"role": "assistant", "content": c}] for c in COMPLETIONS] if conversational
                   else COMPLETIONS)
    expected, per_func = _trl_scores([prompt] * len(COMPLETIONS), completions, ids,
                                     [_trl_function(f) for _, f, _ in terms], [w for _, _, w in terms])
    assert (per_func != 0).any() and (torch.isnan(per_func).any() or not conversational)
    verifier = RewardFunctionsVerifier(terms=[dict(t, weight=w) for t, _, w in terms])
    try:
        got = verifier.score_batch(COMPLETIONS, problems, token_ids=ids)
    finally:
        verifier.close()
    assert not any(s.flags for s in got), [s.details for s in got]
    assert [s.reward for s in got] == pytest.approx(expected.tolist(), abs=1e-6)
