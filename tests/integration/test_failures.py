"""Failures during a run: verifier exceptions and NaN updates never crash silently or corrupt it."""

from __future__ import annotations

import json

import pytest
import torch

from rlvr import config
from rlvr.errors import UserError
from rlvr.train import train
from rlvr.verifiers.base import register_verifier


def _cfg(tmp_path, *overrides):
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps({"id": i, "prompt": f"{i}+1=", "reference": str(i + 1)}) + "\n"
                            for i in range(8)))
    return config.from_dict({}, [
        f"run.dir={tmp_path / 'run'}", "run.progress=false", "run.threads=1", "run.report=false",
        "run.eval_every=0", "run.save_every=0", "model.path=builtin:tiny-llama", "data.task=",
        f"data.train_path={data}", "data.heldout_size=0", "rollout.max_new_tokens=6",
        "grpo.steps=3", "grpo.group_size=2", "grpo.prompts_per_step=2", *overrides])


def _lines(tmp_path):
    return [json.loads(l) for l in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]


class FlakyVerifier:
    """Raises on every other call, returns a wrong number of scores on the rest."""

    name = "flaky"

    def __init__(self, **_):
        self.calls = 0

    def check_reference(self, problem):
        return None

    def score_batch(self, responses, problems):
        self.calls += 1
        if self.calls % 2:
            raise RuntimeError("worker died")
        return []


def test_verifier_exceptions_give_flagged_zero_rewards(tmp_path):
    register_verifier("flaky", FlakyVerifier)
    summary = train(_cfg(tmp_path, "data.verifier=flaky"))
    assert summary["steps"] == 3
    steps = [r for r in _lines(tmp_path) if "reward/mean" in r]
    assert len(steps) == 3
    assert all(r["flags/verifier_error"] == 1.0 and r["reward/mean"] == 0.0 for r in steps)


def test_nan_gradients_skip_the_update_and_stop_after_k(tmp_path, monkeypatch):
    import rlvr.training.update as update

    real = update.grpo_loss

    def nan_loss(*args, **kwargs):
        loss, stats = real(*args, **kwargs)
        return loss * float("nan"), stats

    monkeypatch.setattr(update, "grpo_loss", nan_loss)
    register_verifier("always_half", HalfVerifier)
    cfg = _cfg(tmp_path, "data.verifier=always_half", "grpo.steps=10", "run.max_bad_steps=3")
    with pytest.raises(UserError, match="3 updates in a row had NaN/inf"):
        train(cfg)
    alarms = [r for r in _lines(tmp_path) if r.get("name") == "non_finite"]
    assert alarms and "update was skipped" in alarms[0]["message"]
    assert [r["step"] for r in _lines(tmp_path) if "reward/mean" in r] == [0, 1, 2]


class HalfVerifier:
    """Rewards the first completion of each batch: every group has reward variance."""

    name = "always_half"

    def __init__(self, **_):
        pass

    def check_reference(self, problem):
        return None

    def score_batch(self, responses, problems):
        from rlvr.types import Score
        return [Score(float(i == 0), i == 0) for i in range(len(responses))]


def test_nan_update_leaves_weights_untouched():
    import rlvr.training.update as update
    from rlvr.models.policy import load_policy

    model, tok = load_policy("builtin:tiny-llama")
    before = [p.detach().clone() for p in model.parameters()]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    grad_norm = update._step(model, opt, sum(p.sum() for p in model.parameters()) * float("nan"), 1.0)
    assert grad_norm != grad_norm  # NaN reported
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
