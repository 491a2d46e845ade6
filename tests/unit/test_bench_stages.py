"""bench/grpo_vs_trl.py's pieces that decide its real-model figures: TRL's reward is rlvr's verifier of
the task on the assistant's text, and the per-stage summary divides the floor by the stage's own
time, leaving out steps where rlvr skipped the update (it still logs a few microseconds for them)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import grpo_vs_trl  # noqa: E402
import stages  # noqa: E402

from rlvr.tasks.word_problems import WordProblemsTask  # noqa: E402


def test_trl_reward_scores_conversational_completions_by_their_text():
    verifier = WordProblemsTask().verifiers()["math"]
    reward = grpo_vs_trl.verifier_reward(verifier, "math")
    completions = [[{"role": "assistant", "content": "So the total is \\boxed{101}."}],
                   [{"role": "assistant", "content": "The answer is \\boxed{7}."}],
                   "Plain text: \\boxed{101}"]
    assert reward(completions, ["101", "101", "101"]) == [1.0, 0.0, 1.0]


def test_stage_summary_is_floor_over_stage_time_and_skips_steps_without_update():
    steps = [{"generate": 9.0, "verify": 1.0, "update": 0.0},     # warm-up, left out
             {"generate": 4.0, "verify": 1.0, "update": 5.0},
             {"generate": 4.0, "verify": 1.0, "update": 0.0006}]  # no row carried signal
    floors = [{"generate": 1.0, "update": 1.0}, {"generate": 2.0, "update": 4.0},
              {"generate": 2.0, "update": 0.0}]
    out = stages.stage_summary(steps, [10.0, 10.0, 5.0], floors, warmup=1)
    assert out["generate"]["of_floor"] == pytest.approx(0.5)
    assert out["update"]["of_floor"] == pytest.approx(0.8)     # only the step that updated
    assert out["generate"]["share"] == pytest.approx((0.4 + 0.8) / 2)
    assert "of_floor" not in out["verify"]


def test_trl_stages_update_is_step_minus_prepare_inputs():
    rec = stages.TrlStages()
    rec._open.update({"transformers.generate": 3.0, "_prepare_inputs": 4.5, "_calculate_rewards": 0.5})
    rec.end_step(10.0)
    assert rec.steps == [{"generate": 3.0, "verify": 0.5, "update": 5.5}]
    assert rec._open == {}
