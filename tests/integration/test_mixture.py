"""`data.mix`: three sources in three public layouts (prompt/reference JSONL, a problem/answer
folder in the hub's layout, GSM8K-style question/answer JSONL) train 20 steps with per-source
metrics, and a run SIGKILLed at a random step resumes to the same metric lines (timings dropped)."""

from __future__ import annotations

import json
import os
import random
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from test_resume import _cmd, _kill_when, _metric_lines, _steps_logged

NAMES = ("add3", "pa", "gsm")


def _sources(tmp_path: Path) -> list[dict]:
    from rlvr.tasks.arithmetic import ArithmeticTask

    rng = random.Random(0)
    add3 = ArithmeticTask(3, "+").sample(rng, 40, "train")
    (tmp_path / "add3.jsonl").write_text("".join(
        json.dumps({"prompt": p.prompt, "reference": p.reference, "verifier": "arithmetic"}) + "\n"
        for p in add3))
    (tmp_path / "pa" / "data").mkdir(parents=True, exist_ok=True)
    rows = [{"problem": p.prompt, "answer": p.reference} for p in ArithmeticTask(2, "+").sample(rng, 30, "train")]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "pa" / "data" / "train-00000-of-00001.parquet")
    gsm = ArithmeticTask(3, "+").sample(rng, 30, "train")
    (tmp_path / "gsm.jsonl").write_text("".join(
        json.dumps({"question": p.prompt, "answer": f"{p.prompt}<<{p.prompt}{p.reference}>>\n"
                    f"#### {int(p.reference):,}"}) + "\n" for p in gsm))
    return [{"path": str(tmp_path / "add3.jsonl"), "weight": 2},
            {"path": str(tmp_path / "pa"), "weight": 1},
            {"path": str(tmp_path / "gsm.jsonl"), "weight": 1, "verifier": "arithmetic"}]


def _config(tmp_path: Path, run_dir: Path, model: Path) -> Path:
    cfg = tmp_path / f"{run_dir.name}.yaml"
    cfg.write_text(json.dumps({
        "seed": 5,
        "run": {"dir": str(run_dir), "save_every": 3, "eval_every": 0, "keep_last": 2, "progress": False,
                "threads": 1, "report": False},
        "model": {"path": str(model)},
        "data": {"task": "", "mix": _sources(tmp_path), "heldout_size": 0},
        "rollout": {"max_new_tokens": 40},
        "grpo": {"steps": 20, "group_size": 4, "prompts_per_step": 4, "lr": 5.0e-5}}))
    return cfg


def test_mixture_trains_with_per_source_metrics_and_resumes_exactly(tmp_path, cold_start_model):
    ref_dir = tmp_path / "uninterrupted"
    proc = subprocess.run(_cmd(_config(tmp_path, ref_dir, cold_start_model)), capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    steps = [r for r in _metric_lines(ref_dir) if "reward/mean" in r]
    assert len(steps) == 20
    for r in steps:
        assert sum(r[f"source/{n}/prompts"] for n in NAMES) == 4
    drawn = {n: sum(r[f"source/{n}/prompts"] for r in steps) for n in NAMES}
    assert all(drawn.values()) and drawn["add3"] > max(drawn["pa"], drawn["gsm"])   # weight 2 vs 1
    # the arithmetic verifier scores the GSM8K-style rows: their references lost the separators
    assert any(r.get("source/add3/reward_mean", 0) > 0 for r in steps)
    assert any(r.get("source/gsm/pass_rate", 0) > 0 for r in steps)

    run_dir = tmp_path / "killed"
    cfg = _config(tmp_path, run_dir, cold_start_model)
    at = random.Random(int(os.environ.get("RLVR_RESUME_SEED", "0"))).randint(4, 16)
    proc = subprocess.Popen(_cmd(cfg), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert _kill_when(proc, lambda: _steps_logged(run_dir) >= at, timeout=600)
    done = subprocess.run(_cmd(cfg), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert _metric_lines(run_dir) == _metric_lines(ref_dir)
