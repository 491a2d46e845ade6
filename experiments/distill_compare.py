"""The seeds' distillation comparison on the tiny model (issue 50), at (roughly) equal wall time.

Arms, each from the same student checkpoint and for each seed: GRPO alone, off-policy distillation
(`rlvr sft --teacher`: rejection-sampled teacher traces, then SFT), on-policy distillation
(`distill.only`), GRPO + on-policy distillation. Every final model is scored by one function, greedy
accuracy on the same held-out problems; each arm's wall time is recorded beside it.

    python -m experiments.distill_compare --student runs/distill/student --teacher runs/distill/teacher

Writes `runs/experiments/distill_compare/result.json` and `verdict.md`. Nothing here downloads.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

from experiments.common import ROOT, say


def _train(out: Path, student: str, teacher: str, seed: int, steps: int, extra: list[str]) -> float:
    from rlvr import config as config_mod
    from rlvr.train import train

    cfg = config_mod.load(config_mod.PRESETS / "quickstart.yaml", [
        f"model.path={student}", f"run.dir={out}", "run.resume=never", f"seed={seed}",
        f"grpo.steps={steps}", "grpo.group_size=8", "grpo.prompts_per_step=8", "grpo.lr=5e-5",
        "grpo.lr_schedule=constant", "run.eval_every=0", "run.save_every=0", "run.report=false",
        "run.progress=false", "data.heldout_size=200", "doctor.enabled=false",
        "run.trackers=[]"] + [x.replace("TEACHER", teacher) for x in extra])
    t0 = time.perf_counter()
    train(cfg)
    return time.perf_counter() - t0


def _offpolicy(out: Path, student: str, teacher: str, seed: int, sft_steps: int) -> float:
    from rlvr.cli.main import main

    t0 = time.perf_counter()
    rc = main(["sft", "--model", student, "--teacher", teacher, "--out", str(out / "final"),
               "--num-problems", "128", "--k", "4", "--steps", str(sft_steps), "--batch-size", "32",
               "--lr", "5e-5", "--warmup-steps", "0", "--seed", str(seed), "--threads", "0"])
    assert rc == 0
    return time.perf_counter() - t0


def _accuracy(model_dir: str) -> float:
    from rlvr import config as config_mod
    from rlvr.evaluation.metrics import greedy_accuracy
    from rlvr.models.policy import load_policy
    from rlvr.rollout.hf import HFEngine
    from rlvr.tasks.arithmetic import ArithmeticVerifier
    from rlvr.tasks.base import build_task

    cfg = config_mod.load(config_mod.PRESETS / "quickstart.yaml", ["data.heldout_size=200"])
    model, tok = load_policy(model_dir)
    heldout = build_task(cfg).heldout(200)
    return greedy_accuracy(HFEngine(model, tok), heldout, {"arithmetic": ArithmeticVerifier()},
                           48)["eval/accuracy"]


ARMS = {
    "grpo": [],
    "opd": ["distill.teacher=TEACHER", "distill.only=true"],
    "grpo+opd": ["distill.teacher=TEACHER"],
}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--student", required=True)
    p.add_argument("--teacher", required=True)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--sft-steps", type=int, default=150)
    args = p.parse_args()
    root = ROOT / "distill_compare"
    shutil.rmtree(root, ignore_errors=True)   # a fresh comparison: the runs refuse a used run.dir
    rows = [{"arm": "student (start)", "accuracy": _accuracy(args.student)},
            {"arm": "teacher", "accuracy": _accuracy(args.teacher)}]
    for seed in args.seeds:
        for arm, extra in ARMS.items():
            out = root / f"{arm}-s{seed}"
            wall = _train(out, args.student, args.teacher, seed, args.steps, extra)
            rows.append({"arm": arm, "seed": seed, "wall_s": round(wall, 1),
                         "accuracy": _accuracy(str(out / "final"))})
            say(json.dumps(rows[-1]))
        out = root / f"offpolicy-s{seed}"
        wall = _offpolicy(out, args.student, args.teacher, seed, args.sft_steps)
        rows.append({"arm": "offpolicy", "seed": seed, "wall_s": round(wall, 1),
                     "accuracy": _accuracy(str(out / "final"))})
        say(json.dumps(rows[-1]))
    (root / "result.json").write_text(json.dumps(rows, indent=2))
    lines = ["| arm | seed | held-out greedy accuracy (200) | wall s |", "|---|---|---|---|"]
    lines += [f"| {r['arm']} | {r.get('seed', '')} | {r['accuracy']:.1%} | {r.get('wall_s', '')} |"
              for r in rows]
    (root / "verdict.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
