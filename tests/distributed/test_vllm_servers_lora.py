"""LoRA through vLLM servers, with the trainer in this environment (no vLLM here; the server runs
under `.venv-vllm`, found by `rollout.vllm_python`'s default).

The servers take merged weights (W + ΔW, `models.lora.engine_state`). After the first update the
adapters are non-zero, so a server sampling from the bare base weights, or from stale ones, shows
in `mismatch/kl` (the trainer's PEFT forward against the servers' behaviour log-probs, every step)
and in the canary; both must stay at float32 noise.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("peft")
SRC = Path(__file__).parent.parent.parent / "src"


def test_lora_run_on_a_server_trains_on_its_samples(tmp_path, cold_start_model):
    from rlvr.errors import ConfigError
    from rlvr.rollout.vllm.launch import server_python

    try:
        python = server_python(os.environ.get("RLVR_VLLM_PYTHON", ""))
    except ConfigError as exc:
        pytest.skip(f"no interpreter with vLLM for the servers: {exc}")
    run_dir, steps = tmp_path / "lora", 4
    cfg = tmp_path / "lora.yaml"
    cfg.write_text(
        "seed: 0\n"
        f"run: {{dir: {run_dir}, eval_every: {steps}, save_every: {steps}, progress: false, threads: 1, report: false}}\n"
        f"model: {{path: '{cold_start_model}', lora: {{r: 8, alpha: 16}}}}\n"
        "data: {task: arithmetic, difficulty: 3, heldout_size: 16}\n"
        f"rollout: {{engine: vllm_server, vllm_python: {python}, max_new_tokens: 40, "
        "vllm_options: {max_model_len: 128, kv_cache_memory_bytes: 268435456}}\n"
        f"grpo: {{steps: {steps}, group_size: 8, prompts_per_step: 8, lr: 2.0e-3, "
        "skip_zero_advantage: false}\n")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, "-m", "rlvr.cli", "train", str(cfg)], env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    trained = [r for r in records if "mismatch/kl" in r]
    canary = [r["mismatch/canary_kl"] for r in records if "mismatch/canary_kl" in r]
    worst = max(r["mismatch/kl"] for r in trained)
    print(f"LoRA on a vLLM server: max mismatch/kl {worst:.1e}, max canary_kl {max(canary):.1e}")
    # every step measures (skip_zero_advantage off); after step 0's update the adapters are non-zero
    assert len(trained) == steps and worst < 1e-9
    assert len(canary) >= steps - 1 and max(canary) < 1e-6
