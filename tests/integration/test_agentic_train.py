"""`rlvr train` on the built-in agentic task, from the documented cold start `rlvr sft --task agentic`.

The cold start's traces include a 20 % share of tamper episodes (empty the check, run it), so the
read-only workspace refuses and flags some sampled episodes: the tamper rate and the doctor's alarm
are exercised on real episodes. Every run is the real CLI in a subprocess, with real sandboxes.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

NON_DETERMINISTIC = ("time", "timing/", "tokens_per_s")


@pytest.fixture(scope="module")
def agentic_cold_start(tmp_path_factory):
    out = tmp_path_factory.mktemp("agentic") / "sft"
    subprocess.run([sys.executable, "-m", "rlvr.cli", "sft", "--task", "agentic", "--out", str(out),
                    "--steps", "150", "--batch-size", "32", "--tamper-share", "0.2", "--threads", "1"],
                   check=True, capture_output=True, timeout=600)
    return out


def _config(tmp_path: Path, run_dir: Path, model: Path, steps: int = 4) -> Path:
    cfg = tmp_path / f"{run_dir.name}.yaml"
    cfg.write_text(
        "seed: 5\n"
        f"run: {{dir: {run_dir}, save_every: 2, eval_every: 2, keep_last: 2, progress: false,"
        " threads: 1, report: false, transcripts_every: 1}\n"
        f"model: {{path: {model}}}\n"
        "data: {task: agentic, difficulty: 3, heldout_size: 8}\n"
        f"grpo: {{steps: {steps}, group_size: 4, prompts_per_step: 4, lr: 2.0e-4}}\n"
        "agent: {max_turns: 5, max_tokens: 80, turn_tokens: 24}\n"
        "doctor: {tamper_max: 0.01, cooldown: 0}\n")
    return cfg


def _train(cfg: Path, *overrides: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rlvr.cli", "train", str(cfg), *overrides],
                          capture_output=True, text=True, timeout=600)


def _records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def _deterministic(run_dir: Path) -> list[dict]:
    return [{k: v for k, v in r.items() if not k.startswith(NON_DETERMINISTIC)} for r in _records(run_dir)]


def _weights(run_dir: Path) -> str:
    return hashlib.sha256((run_dir / "final" / "model.safetensors").read_bytes()).hexdigest()


def test_rlvr_train_runs_agent_episodes_end_to_end(tmp_path, agentic_cold_start):
    run_dir = tmp_path / "run"
    proc = _train(_config(tmp_path, run_dir, agentic_cold_start))
    assert proc.returncode == 0, proc.stderr
    records = _records(run_dir)
    steps = [r for r in records if "reward/mean" in r]
    assert len(steps) == 4
    for r in steps:
        # scores come from the environment, through the task's verifier
        assert r["reward/workspace/share"] == 1.0
        assert 1.0 < r["episodes/turns_mean"] <= 5.0
        assert abs(sum(r[f"episodes/finish_{k}"] for k in ("stop", "turns", "tokens", "env")) - 1) < 1e-9
    updated = [r for r in steps if r.get("grad_norm", 0) > 0]
    assert updated
    for r in updated:
        # behaviour log-probs line up with the trainer's on model tokens across turns (on-policy:
        # ratio 1); environment tokens are out of the loss mask, or their 0.0 would show here
        assert r["mismatch/kl"] < 1e-6 and abs(r["mismatch/ratio_mean"] - 1) < 1e-4
    assert 0 < sum(r["reward/mean"] for r in steps) / len(steps) < 1     # learnable: mixed groups
    # the cold start's tamper share shows up as refused, flagged episodes, and the doctor alarms
    assert any(r["behaviour/tamper_rate"] > 0 for r in steps)
    assert all(r["behaviour/tamper_rate"] == r.get("flags/tamper_attempt", 0.0) for r in steps)
    assert any(r.get("event") == "alarm" and r["name"] == "tampering" for r in records)
    assert [r["step"] for r in records if "eval/accuracy" in r] == [2, 4]
    transcript = json.loads((run_dir / "transcripts.jsonl").read_text().splitlines()[0])
    assert transcript["completion"].startswith(("calc:", "write:"))


def test_agentic_run_killed_mid_run_resumes_exactly(tmp_path, agentic_cold_start):
    ref = tmp_path / "ref"
    assert _train(_config(tmp_path, ref, agentic_cold_start, steps=6)).returncode == 0
    run_dir = tmp_path / "killed"
    cfg = _config(tmp_path, run_dir, agentic_cold_start, steps=6)
    proc = subprocess.Popen([sys.executable, "-m", "rlvr.cli", "train", str(cfg)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    metrics, deadline = run_dir / "metrics.jsonl", time.time() + 300
    while proc.poll() is None and time.time() < deadline:   # kill after step 3 (a checkpoint at 2)
        if metrics.exists() and metrics.read_text().count('"reward/mean"') >= 3:
            os.kill(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.005)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    assert any((run_dir / "checkpoints").iterdir())
    resumed = _train(cfg)
    assert resumed.returncode == 0, resumed.stderr
    assert _weights(run_dir) == _weights(ref)
    assert _deterministic(run_dir) == _deterministic(ref)


@pytest.mark.parametrize("override, message", [
    (["agent.turn_tokens=100"], "agent.turn_tokens (100) must be <= agent.max_tokens (80)"),
    (["agent.max_turns=0"], "agent.max_turns"),
    (["rollout.max_staleness=1"], "rollout.max_staleness: data.task=agentic"),
    (["model.path=builtin:tiny-llama"], "model.path: this tokenizer cannot write"),
])
def test_bad_agentic_configs_exit_2_before_writing(tmp_path, override, message):
    run_dir = tmp_path / "bad"
    proc = _train(_config(tmp_path, run_dir, Path("builtin:tiny-llama")), *override)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert not run_dir.exists()
