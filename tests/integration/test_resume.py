"""Exact resume: SIGKILL `rlvr train` at random points (one during a checkpoint write), resume each
time, and compare the final weights and the metric lines with an uninterrupted run. The model is the
SFT cold start (it earns rewards), so optimizer steps really run between the kills."""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

NON_DETERMINISTIC = ("time", "timing/", "tokens_per_s")


def _config(tmp_path: Path, run_dir: Path, model: Path | str = "builtin:tiny-llama") -> Path:
    cfg = tmp_path / f"{run_dir.name}.yaml"
    cfg.write_text(
        "seed: 3\n"
        f"run: {{dir: {run_dir}, save_every: 2, eval_every: 4, keep_last: 2, progress: false,"
        " threads: 1, report: false, transcripts_every: 1}\n"
        f"model: {{path: {model}}}\n"
        "data: {task: arithmetic, difficulty: 3, heldout_size: 16}\n"
        "rollout: {max_new_tokens: 40}\n"
        "grpo: {steps: 12, group_size: 4, prompts_per_step: 4, lr: 5.0e-5, warmup_steps: 2}\n")
    return cfg


def _cmd(cfg: Path) -> list[str]:
    return [sys.executable, "-m", "rlvr.cli", "train", str(cfg)]


def _weights_hash(run_dir: Path) -> str:
    return hashlib.sha256((run_dir / "final" / "model.safetensors").read_bytes()).hexdigest()


def _metric_lines(run_dir: Path) -> list[dict]:
    out = []
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        rec = json.loads(line)
        out.append({k: v for k, v in rec.items() if not k.startswith(NON_DETERMINISTIC)})
    return out


def _kill_when(proc: subprocess.Popen, ready, timeout: float = 120) -> bool:
    """SIGKILL `proc` as soon as `ready()` holds; False if it finished first."""
    deadline = time.time() + timeout
    while proc.poll() is None and time.time() < deadline:
        if ready():
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            return True
        time.sleep(0.002)
    proc.wait(timeout=max(1, deadline - time.time()))
    return False


def _steps_logged(run_dir: Path) -> int:
    path = run_dir / "metrics.jsonl"
    return path.read_text().count('"reward/mean"') if path.exists() else 0


def _updated_steps(run_dir: Path) -> int:
    return sum(r.get("grad_norm", 0) > 0 for r in _metric_lines(run_dir) if "reward/mean" in r)


# k = 1: rollouts generated one step ahead in a thread, buffered in checkpoints; the entropy bonus
# makes every step update the weights, so stale rollouts differ from fresh ones.
ASYNC = ["rollout.max_staleness=1", "grpo.entropy_coef=0.01"]


@pytest.mark.parametrize("overrides", [[], ASYNC], ids=["sync", "async-k1"])
def test_sigkill_at_random_points_then_resume_is_exact(tmp_path, cold_start_model, overrides):
    from safetensors.torch import load_file

    ref_dir = tmp_path / "uninterrupted"
    subprocess.run(_cmd(_config(tmp_path, ref_dir, cold_start_model)) + overrides, check=True,
                   capture_output=True, timeout=300)
    # The run must train: most steps update the weights, and the result differs from the start.
    assert _updated_steps(ref_dir) >= 3
    start, end = load_file(str(cold_start_model / "model.safetensors")), \
        load_file(str(ref_dir / "final" / "model.safetensors"))
    assert any(not (start[k] == end[k]).all() for k in start)

    run_dir = tmp_path / "killed"
    cfg = _config(tmp_path, run_dir, cold_start_model)
    rng = random.Random(int(os.environ.get("RLVR_RESUME_SEED", "0")))
    ckpts = run_dir / "checkpoints"
    kills = [
        lambda: _steps_logged(run_dir) >= rng.randint(1, 3),                 # mid-run, early
        lambda: any(ckpts.glob(".tmp-step-*")) if ckpts.exists() else False,  # during a checkpoint write
        lambda: _steps_logged(run_dir) >= rng.randint(6, 8),
        lambda: _steps_logged(run_dir) >= rng.randint(9, 11),
    ]
    killed = 0
    for ready in kills:
        proc = subprocess.Popen(_cmd(cfg) + overrides, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        killed += _kill_when(proc, ready)
    proc = subprocess.run(_cmd(cfg) + overrides, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert killed >= 3
    assert _weights_hash(run_dir) == _weights_hash(ref_dir)
    assert _metric_lines(run_dir) == _metric_lines(ref_dir)
    assert not list(ckpts.glob(".tmp-step-*"))
    if overrides:
        steps = [r for r in _metric_lines(run_dir) if "reward/mean" in r]
        assert [r["async/staleness"] for r in steps] == [0.0] + [1.0] * (len(steps) - 1)
        assert all(r["optimizer_steps"] == 1.0 for r in steps)
        assert max(r["mismatch/kl"] for r in steps[1:]) > 1e-6 > steps[0]["mismatch/kl"]


def test_resume_continues_the_log_without_duplicates(tmp_path):
    run_dir = tmp_path / "r"
    cfg = _config(tmp_path, run_dir)
    # more steps on resume keep every step's learning rate only under a constant schedule
    constant = ["grpo.lr_schedule=constant"]
    subprocess.run(_cmd(cfg) + ["grpo.steps=4", *constant], check=True, capture_output=True, timeout=300)
    subprocess.run(_cmd(cfg) + ["grpo.steps=6", *constant], check=True, capture_output=True, timeout=300)
    steps = [r["step"] for r in _metric_lines(run_dir) if "reward/mean" in r]
    assert steps == list(range(6))


def test_failed_checkpoint_write_keeps_the_previous_one(tmp_path, monkeypatch):
    from rlvr.training import checkpoint
    from rlvr import config
    from rlvr.train import train

    run_dir = tmp_path / "fail"
    cfg = config.load(_config(tmp_path, run_dir), ["grpo.steps=4"])
    real_save = checkpoint.save

    def flaky_save(root, step, *args, **kwargs):
        if step == 4:
            raise OSError(28, "No space left on device")
        return real_save(root, step, *args, **kwargs)

    monkeypatch.setattr(checkpoint, "save", flaky_save)
    train(cfg)
    assert [p.name for p in checkpoint.complete_checkpoints(run_dir / "checkpoints")] == ["step-000002"]
    events = [r for r in _metric_lines(run_dir) if r.get("name") == "checkpoint_failed"]
    assert events and "previous one is intact" in events[0]["message"]
