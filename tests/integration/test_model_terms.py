"""Model reward terms for real: a sequence-classification reward model built locally from the tiny
model's config (no download) and loaded by path, and a judge served over a local OpenAI-compatible
chat endpoint (`rlvr.testing.chat_server`, transformers generate on the tiny model)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
import torch

from rlvr.types import Problem
from rlvr.verifiers.reward_funcs import RewardFunctionsVerifier

RESPONSES = ["12", "a much longer answer than the others", ">13", "", "x y z"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from rlvr.models.tiny import save_tiny_model

    return save_tiny_model(tmp_path_factory.mktemp("tiny") / "m", seed=1)


def _problems(n):
    return [Problem(f"p{i}", f"{i}+11=", str(i + 11), "reward_funcs") for i in range(n)]


def test_reward_model_scores_are_its_logits_in_any_batch_size(tiny, tmp_path):
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

    from rlvr.verifiers.reward_model import RewardModelVerifier

    torch.manual_seed(0)
    rm = AutoModelForSequenceClassification.from_config(AutoConfig.from_pretrained(tiny, num_labels=1))
    rm.save_pretrained(tmp_path / "rm")
    AutoTokenizer.from_pretrained(tiny).save_pretrained(tmp_path / "rm")
    batched = RewardModelVerifier(path=str(tmp_path / "rm"), batch_size=3, device="cpu")
    single = RewardModelVerifier(path=str(tmp_path / "rm"), batch_size=1, device="cpu")
    problems = _problems(len(RESPONSES))
    got = [s.reward for s in batched.score_batch(RESPONSES, problems)]
    one = [s.reward for s in single.score_batch(RESPONSES, problems)]
    assert got == pytest.approx(one, abs=1e-5)            # padding does not move a score
    tok = AutoTokenizer.from_pretrained(tmp_path / "rm")
    with torch.no_grad():
        direct = [rm.eval()(**tok(p.prompt + r, return_tensors="pt")).logits[0, 0].item()
                  for r, p in zip(RESPONSES, problems)]
    assert got == pytest.approx(direct, abs=1e-5) and len(set(got)) == len(got)


@pytest.fixture(scope="module")
def chat(tiny):
    proc = subprocess.Popen([sys.executable, "-m", "rlvr.testing.chat_server", str(tiny)],
                            stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert line.startswith("listening on "), line
    yield line.split()[-1]
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()


def test_judge_over_a_served_model_parses_what_the_model_said(tiny, chat):
    from rlvr.testing.chat_server import ChatModel
    from rlvr.verifiers.judge import parse_verdict

    template, verdict = "{prompt}{response}", r"(\d)"
    v = RewardFunctionsVerifier(terms=[{"verifier": "arithmetic"}, {
        "verifier": "judge", "name": "judge", "weight": 0.5,
        "options": {"url": chat, "template": template, "verdict": verdict, "max_score": 9.0,
                    "max_tokens": 12, "concurrency": 3}}])
    local = ChatModel(str(tiny))
    problems = _problems(len(RESPONSES))
    try:
        scores = v.score_batch(RESPONSES, problems)
    finally:
        v.close()
    for s, r, p in zip(scores, RESPONSES, problems):
        said = local.reply([{"role": "user", "content": p.prompt + r}], 12)
        expected = parse_verdict(said, verdict, 9.0)
        assert s.details["terms"]["judge"] == (0.0 if expected is None else pytest.approx(expected))
        assert s.details["model_terms"] == ["judge"] and "term_errors" not in s.details


def test_an_unreachable_judge_is_a_reward_crash():
    v = RewardFunctionsVerifier(terms=[{"verifier": "judge", "name": "judge",
                                        "options": {"url": "http://127.0.0.1:9/v1", "retries": 0}}])
    scores = v.score_batch(["a", "b"], _problems(2))
    assert all(s.flags == ("crash",) and "judge" in s.details["term_errors"] for s in scores)
