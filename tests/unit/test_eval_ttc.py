"""Budget forcing, greedy continuation and ttc_metrics, with hand-computed values."""

import pytest

from rlvr.errors import UserError
from rlvr.evaluation.metrics import score_groups
from rlvr.rollout.base import SamplingParams
from rlvr.tasks.arithmetic import ArithmeticTask, ArithmeticVerifier, make_problem
from rlvr.models.tiny import build_tokenizer
from rlvr.evaluation.ttc import budget_curve, marker_ids, temperature_sweep, ttc_metrics
from rlvr.types import Completion, Group

TOK = build_tokenizer()
EOS = TOK.eos_token_id
VERIFIERS = {"arithmetic": ArithmeticVerifier()}


def _ids(text: str) -> list[int]:
    return TOK(text, add_special_tokens=False)["input_ids"]


class TraceEngine:
    """Thinks with the reasoner's exact trace. Made to answer early (`answer`), it gets the sum
    right iff it has written at least two column blocks (two '|'), else it says 0."""

    def __init__(self):
        self.tokenizer, self.generate_calls, self.decoded = TOK, 0, []

    def generate(self, problems, n, params, seed):
        assert params.greedy and n == 1
        self.generate_calls += 1
        groups = []
        for p in problems:
            ids = _ids(ArithmeticTask().trace(p)) + [EOS]
            cut = ids[:params.max_new_tokens]
            reason = "stop" if len(cut) == len(ids) else "length"
            text = TOK.decode(cut, skip_special_tokens=True)
            groups.append(Group(p, TOK(p.prompt)["input_ids"], [Completion(text, cut, [], reason)]))
        return groups

    def answer(self, prompts, max_new_tokens):
        assert max_new_tokens == 8
        out = []
        for ids in prompts:
            text = TOK.decode(ids, skip_special_tokens=True)
            self.decoded.append(text)
            question, thought = text.split("=", 1)
            a, b = question.split("+")
            out.append(_ids(str(int(a) + int(b)) if thought.count("|") >= 2 else "0"))
        return out


# traces: "7+5+0=12|4+8+1=13|3+2+1=06|>632" (31 chars) and "9+1+0=10|9+0+1=10|9+0+1=10|>1000" (32)
PROBLEMS = [make_problem(347, 285, "+"), make_problem(999, 1, "+"), make_problem(100, 200, "+")]


def test_budget_curve_hand_values():
    engine = TraceEngine()
    curve = budget_curve(engine, PROBLEMS, VERIFIERS, [40, 0, 10, 20], ">", answer_tokens=8,
                         cont=engine.answer)
    assert engine.generate_calls == 1                     # thinking generated once, at budget 40
    assert [r["budget"] for r in curve] == [0, 10, 20, 40]
    assert [r["accuracy"] for r in curve] == [0.0, 0.0, 1.0, 1.0]
    # budget b: b thinking + 1 marker + answer digits ("0": 1; "632", "1000", "300": 3, 4, 3)
    assert curve[0]["mean_tokens"] == pytest.approx(2)
    assert curve[1]["mean_tokens"] == pytest.approx(12)
    assert curve[2]["mean_tokens"] == pytest.approx(21 + 10 / 3)
    # budget 40: every trace ends by itself (31, 32, 31 characters + EOS)
    assert curve[3]["mean_tokens"] == pytest.approx((32 + 33 + 32) / 3)
    assert [r["forced_fraction"] for r in curve] == [1.0, 1.0, 1.0, 0.0]
    assert "347+285=7+5+0=12|4+8+1=13|3+>" in engine.decoded  # cut at 20 tokens, marker appended


def test_marker_must_be_representable():
    assert marker_ids(TOK, ">") == [TOK.convert_tokens_to_ids(">")]
    with pytest.raises(UserError, match="answer marker"):
        marker_ids(TOK, "\n\\boxed{")


class ScriptedSampler:
    """Sample j of every problem answers `answers[j]` (ignores temperature and seed)."""

    def __init__(self, answers):
        self.answers, self.temperatures = answers, []

    def generate(self, problems, n, params, seed):
        self.temperatures.append(params.temperature)
        return [Group(p, [], [Completion(">" + self.answers[j], [], [], "stop") for j in range(n)])
                for p in problems]


def test_ttc_metrics_flat_keys_and_values():
    engine = ScriptedSampler(["632", "631", "631", "632"])
    m = ttc_metrics(engine, PROBLEMS[:1], VERIFIERS, [1, 4], max_new_tokens=40, seed=0)
    assert m == {"eval/pass@1": 0.5, "eval/maj@1": 0.5, "eval/mean@1": 1.0,
                 "eval/pass@4": 1.0, "eval/maj@4": 1.0, "eval/mean@4": 0.5}
    with pytest.raises(ValueError):
        ttc_metrics(engine, PROBLEMS[:1], VERIFIERS, [], max_new_tokens=40, seed=0)


def test_temperature_sweep_one_row_per_temperature():
    engine = ScriptedSampler(["1", "2", "632", "632"])
    calls = []

    def sample(t):
        calls.append(t)
        groups = engine.generate(PROBLEMS[:1], 4, SamplingParams(temperature=t), 0)
        score_groups(groups, VERIFIERS)
        return groups

    rows = temperature_sweep(sample, [0.5, 1.0], [2])
    assert calls == [0.5, 1.0]
    # answers 1, 2, 632, 632: pass@2 = 1 − C(2,2)/C(4,2) = 5/6. Of the six pairs only {632, 632}
    # votes right: a mixed pair is a tie, and ties go to the earlier (wrong) sample.
    assert rows[0]["temperature"] == 0.5 and rows[0]["pass@2"] == pytest.approx(5 / 6)
    assert rows[0]["maj@2"] == pytest.approx(1 / 6)


def test_greedy_continuations_match_the_engines_greedy_decode():
    """Resuming from prompt + the first 3 greedy tokens must reproduce the rest of greedy decoding
    (same model, same cache path), with EOS dropped and batches of uneven prompt lengths."""
    import torch

    from rlvr.rollout.hf import HFEngine
    from rlvr.models.tiny import build_model
    from rlvr.evaluation.ttc import greedy_continuations

    torch.set_num_threads(1)
    model, tok = build_model(seed=3)
    engine = HFEngine(model, tok)
    groups = engine.generate(PROBLEMS[:2] + [make_problem(5, 7, "+")], 1,
                             SamplingParams(max_new_tokens=10, greedy=True), seed=0)
    prompts = [g.prompt_ids + g.completions[0].token_ids[:3] for g in groups]
    rest = greedy_continuations(engine, prompts, 7, batch=2)
    for g, tail in zip(groups, rest):
        c = g.completions[0]
        assert tail == [t for t in c.token_ids[3:] if t != tok.eos_token_id]
