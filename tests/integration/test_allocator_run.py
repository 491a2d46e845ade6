"""A run's results do not depend on the allocator the `rlvr` command preloads (`rlvr.cli.allocator`):
GRPO on the tiny model through the real CLI, once on mimalloc and once on glibc's malloc
(`RLVR_ALLOCATOR=system`), gives the same metric lines (wall-clock fields aside) and the same
final weights, byte for byte; each run's banner names the allocator it ran on."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from rlvr.cli import allocator

pytestmark = pytest.mark.skipif(allocator.preload_reason() is not None,
                                reason=f"no preload here: {allocator.preload_reason()}")

_CLOCK = ("time", "tokens_per_s")


def _run(tmp_path, model, name: str, env_extra: dict) -> tuple[list[dict], bytes]:
    run_dir = tmp_path / name
    cfg = tmp_path / f"{name}.yaml"
    cfg.write_text(
        "seed: 0\n"
        f"run: {{dir: {run_dir}, eval_every: 0, save_every: 4, progress: false, threads: 1, report: false}}\n"
        f"model: {{path: {model}}}\n"
        "data: {task: arithmetic, difficulty: 3, heldout_size: 0}\n"
        "rollout: {max_new_tokens: 40}\n"
        "grpo: {steps: 4, group_size: 8, prompts_per_step: 8, lr: 5.0e-5}\n")
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "RLVR_ALLOCATOR")} | env_extra
    proc = subprocess.run([sys.executable, "-m", "rlvr.cli", "train", str(cfg)], capture_output=True,
                          text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"allocator: {name};" in proc.stdout, proc.stdout[:2000]
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    lines = [{k: v for k, v in r.items() if k not in _CLOCK and not k.startswith("timing/")} for r in lines]
    return lines, (run_dir / "final" / "model.safetensors").read_bytes()


def test_mimalloc_and_glibc_runs_are_the_same_bits(tmp_path, cold_start_model):
    lines_mi, weights_mi = _run(tmp_path, cold_start_model, "mimalloc", {})
    lines_gl, weights_gl = _run(tmp_path, cold_start_model, "glibc", {"RLVR_ALLOCATOR": "system"})
    assert len(lines_mi) == 4 and any(r.get("grad_norm") for r in lines_mi), "the runs must train"
    assert lines_mi == lines_gl
    assert weights_mi == weights_gl
