"""On-policy distillation against GRPO on the real model (issue 50).

Student: SmolLM2-135M-Instruct as shipped. Teacher: the same model after the `smollm2` preset's
GRPO run (trained here first unless `teacher=DIR` names one). Arms, from the same start and seed,
`steps` steps each with the preset's sampling (T = 0.7, 64 tokens, 8 prompts x 8): GRPO alone;
pure on-policy distillation (`distill.only`, the teacher's log-probs at T = 0.7). Every model is
scored by one function, greedy accuracy on the preset's 200 held-out word problems (96 tokens), as
the training run's final evaluation does. Each arm runs as its own `rlvr train` process: its wall
time and peak RSS are that process's.

    python -m experiments.distill_smollm2 [steps=16] [seed=0] [teacher=DIR]

Writes runs/experiments/distill_smollm2/{result.json,verdict.md}. Needs `make real-model`.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from experiments.common import ROOT, say

OUT = ROOT / "distill_smollm2"


def _train(name: str, overrides: list[str]) -> dict:
    """One `rlvr train smollm2` process: its summary, wall seconds and peak RSS (MiB)."""
    run_dir = OUT / name
    cmd = [sys.executable, "-m", "rlvr.cli", "train", "smollm2", f"run.dir={run_dir}", "run.resume=never",
           "run.report=false", "run.progress=false", *overrides]
    say(" ".join(cmd[2:]))
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{name}: rlvr train exited with {os.waitstatus_to_exitcode(status)}")
    summary = json.loads((run_dir / "summary.json").read_text())
    return {"arm": name, "heldout_greedy": summary["final_accuracy"], "train_s": round(summary["wall_seconds"], 1),
            "process_wall_s": round(wall, 1), "peak_rss_mib": round(usage.ru_maxrss / 1024)}


def _start_accuracy() -> float:
    """The untrained student's greedy held-out accuracy, by the run's own evaluation path."""
    from rlvr import config as config_mod
    from rlvr.evaluation.metrics import greedy_accuracy
    from rlvr.models.policy import load_policy
    from rlvr.training.setup import build_device, build_engine, build_problems

    cfg = config_mod.load(config_mod.PRESETS / "smollm2.yaml", [])
    verifiers, _, heldout, _ = build_problems(cfg)
    device = build_device(cfg)                  # bf16 where native, as the runs
    model, tok = load_policy(cfg.model.path, cfg.model.dtype, cfg.seed, device)
    engine = build_engine(cfg, model, tok, device)
    return greedy_accuracy(engine, heldout, verifiers, cfg.eval.max_new_tokens)["eval/accuracy"]


def main(argv: list[str]) -> None:
    args = dict(a.split("=", 1) for a in argv)
    steps, seed = int(args.get("steps", 16)), int(args.get("seed", 0))
    OUT.mkdir(parents=True, exist_ok=True)
    rows = []
    teacher = args.get("teacher", "")
    if not teacher:
        rows.append({**_train("teacher", [f"seed={seed}"]), "steps": 36})
        teacher = str(OUT / "teacher" / "final")
    common = [f"seed={seed}", f"grpo.steps={steps}"]
    rows.append({**_train(f"grpo-s{seed}", common), "steps": steps})
    rows.append({**_train(f"opd-s{seed}", common + [f"distill.teacher={teacher}", "distill.only=true"]),
                 "steps": steps})
    start = _start_accuracy()
    host = f"{platform.processor() or platform.machine()}, bf16 native: " + \
        str("avx512_bf16" in Path("/proc/cpuinfo").read_text() or "amx_bf16" in Path("/proc/cpuinfo").read_text())
    result = {"seed": seed, "steps": steps, "teacher": teacher, "student_start": start, "host": host, "arms": rows}
    (OUT / f"result-s{seed}.json").write_text(json.dumps(result, indent=2))
    lines = [f"Student start (SmolLM2-135M-Instruct): {start:.1%} greedy on 200 held-out problems. Host: {host}.",
             "", "| arm | steps | held-out greedy | training s | process wall s | peak RSS MiB |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {r['arm']} | {r['steps']} | {r['heldout_greedy']:.1%} | {r['train_s']} | {r['process_wall_s']} | "
              f"{r['peak_rss_mib']} |" for r in rows]
    (OUT / f"verdict-s{seed}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1:])
