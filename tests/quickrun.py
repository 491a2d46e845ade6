"""A short GRPO run of the quickstart task from the partial cold start, shared by the scale-out
tests (torchrun, Ray, vLLM), which compare held-out accuracies against the one-process HF run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).parent.parent / "src"
STEPS = 20


def env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo",
            "TOKENIZERS_PARALLELISM": "false",
            "PYTHONPATH": str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def run_cli(cmd: list[str], timeout: float = 1200, environ: dict[str, str] | None = None) -> None:
    """Run a command in its own session; on a timeout the whole session goes (a launcher and
    every rank it started), so a hung rank cannot outlive the test."""
    proc = subprocess.Popen(cmd, env=environ or env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(f"timed out after {timeout} s: {' '.join(cmd)}\n{err[-4000:]}")
    assert proc.returncode == 0, out[-2000:] + err[-4000:]


def quick_config(tmp_path: Path, name: str, model: Path, run_extra: str = "", rollout_extra: str = "") -> tuple[Path, Path]:
    run_dir = tmp_path / name
    cfg = tmp_path / f"{name}.yaml"
    cfg.write_text(
        "seed: 0\n"
        f"run: {{dir: {run_dir}, eval_every: {STEPS}, save_every: {STEPS}, progress: false, threads: 1, "
        f"report: false{run_extra}}}\n"
        f"model: {{path: {model}}}\n"
        "data: {task: arithmetic, difficulty: 3, heldout_size: 200}\n"
        f"rollout: {{max_new_tokens: 40{rollout_extra}}}\n"
        f"grpo: {{steps: {STEPS}, group_size: 16, prompts_per_step: 8, lr: 5.0e-5}}\n")
    return cfg, run_dir


def final_accuracy(run_dir: Path) -> float:
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in records if "eval/accuracy" in r]
    assert [e["step"] for e in evals] == [STEPS], evals
    return evals[-1]["eval/accuracy"]


def train_accuracy(tmp_path: Path, name: str, model: Path, launcher: list[str] | None = None, **extra) -> float:
    cfg, run_dir = quick_config(tmp_path, name, model, **extra)
    run_cli((launcher or [sys.executable]) + ["-m", "rlvr.cli", "train", str(cfg)])
    return final_accuracy(run_dir)


def start_accuracy(model_path: Path, n: int = 200) -> float:
    from rlvr.evaluation.metrics import greedy_accuracy
    from rlvr.models.policy import load_policy
    from rlvr.rollout.hf import HFEngine
    from rlvr.tasks.arithmetic import ArithmeticTask, ArithmeticVerifier

    model, tok = load_policy(str(model_path))
    return greedy_accuracy(HFEngine(model, tok), ArithmeticTask(3).heldout(n),
                           {"arithmetic": ArithmeticVerifier()}, 40)["eval/accuracy"]
