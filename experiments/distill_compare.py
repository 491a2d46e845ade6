"""The seeds' distillation comparison on the tiny model (issue 50), at equal training time.

Arms, each from the same student checkpoint and for each seed: GRPO alone, off-policy distillation
(`rlvr sft --teacher`: rejection-sampled teacher traces, then SFT), on-policy distillation
(`distill.only`), GRPO + on-policy distillation. Equal compute is equal training seconds: the
budget is the GRPO arm's summed `timing/step` over `--steps` steps (sampling, scoring, teacher
forward and update; evaluations excluded); each on-policy arm is read at its last held-out
evaluation (every `--eval-every` steps) whose summed step time is within the budget, and the
off-policy arm's whole wall time (teacher sampling + SFT) is printed beside its score. Every model
is scored greedily on the same 200 held-out problems (the training runs' own evaluation, and one
function for the start, the teacher and the off-policy arm).

    rlvr quickstart --no-eval run.dir=runs/distill-src     # student: .../sft, teacher: .../final
    python -m experiments.distill_compare --student runs/distill-src/sft --teacher runs/distill-src/final

Writes `runs/experiments/distill_compare/result.json` and `verdict.md`. Nothing here downloads.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

from experiments.common import ROOT, say


def _train(out: Path, student: str, teacher: str, seed: int, steps: int, every: int, extra: list[str]) -> float:
    from rlvr import config as config_mod
    from rlvr.train import train

    cfg = config_mod.load(config_mod.PRESETS / "quickstart.yaml", [
        f"model.path={student}", f"run.dir={out}", "run.resume=never", f"seed={seed}",
        f"grpo.steps={steps}", "grpo.group_size=8", "grpo.prompts_per_step=8", "grpo.lr=5e-5",
        "grpo.lr_schedule=constant", f"run.eval_every={every}", "run.save_every=0", "run.report=false",
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


def _curve(run_dir: Path) -> list[tuple[int, float, float]]:
    """(steps done, summed step seconds, held-out greedy accuracy) at each evaluation."""
    spent, out = {}, []
    total = 0.0
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        if "timing/step" in row:
            total += row["timing/step"]
            spent[row["step"] + 1] = total
        if "eval/accuracy" in row:
            out.append((row["step"], spent[row["step"]], row["eval/accuracy"]))
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--student", required=True)
    p.add_argument("--teacher", required=True)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--eval-every", type=int, default=5)
    p.add_argument("--sft-steps", type=int, default=280)
    p.add_argument("--arms", nargs="+", default=[*ARMS, "offpolicy"],
                   help="a subset (e.g. offpolicy alone, to size its steps to the GRPO arm's seconds)")
    args = p.parse_args()
    root = ROOT / "distill_compare"
    tag = "" if len(args.arms) == len(ARMS) + 1 else "-" + "-".join(args.arms)
    for arm in args.arms:           # a fresh comparison: the runs refuse a used run.dir
        for seed in args.seeds:
            shutil.rmtree(root / f"{arm}-s{seed}", ignore_errors=True)
    rows = [{"arm": "student (start)", "accuracy": _accuracy(args.student)},
            {"arm": "teacher", "accuracy": _accuracy(args.teacher)}]
    for seed in args.seeds:
        budget = None
        for arm, extra in ARMS.items():      # grpo first: its training seconds are the budget
            if arm not in args.arms:
                continue
            out = root / f"{arm}-s{seed}"
            wall = _train(out, args.student, args.teacher, seed, args.steps, args.eval_every, extra)
            curve = _curve(out)
            budget = curve[-1][1] if budget is None else budget
            step, spent, acc = [c for c in curve if c[1] <= budget * 1.001][-1]
            rows.append({"arm": arm, "seed": seed, "steps": step, "train_s": round(spent, 1),
                         "accuracy": acc, "final_steps": curve[-1][0], "final_train_s": round(curve[-1][1], 1),
                         "final_accuracy": curve[-1][2], "wall_s": round(wall, 1)})
            say(json.dumps(rows[-1]))
        if "offpolicy" not in args.arms:
            continue
        out = root / f"offpolicy-s{seed}"
        wall = _offpolicy(out, args.student, args.teacher, seed, args.sft_steps)
        rows.append({"arm": "offpolicy", "seed": seed, "steps": args.sft_steps, "train_s": round(wall, 1),
                     "accuracy": _accuracy(str(out / "final")), "wall_s": round(wall, 1)})
        say(json.dumps(rows[-1]))
    (root / f"result{tag}.json").write_text(json.dumps(rows, indent=2))
    lines = ["| arm | seed | steps within the budget | training s | held-out greedy (200) | "
             "after all steps (steps, s, acc) |", "|---|---|---|---|---|---|"]
    for r in rows:
        tail = (f"{r['final_steps']}, {r['final_train_s']}, {r['final_accuracy']:.1%}"
                if "final_steps" in r else "")
        lines.append(f"| {r['arm']} | {r.get('seed', '')} | {r.get('steps', '')} | {r.get('train_s', '')} | "
                     f"{r['accuracy']:.1%} | {tail} |")
    (root / f"verdict{tag}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
