"""Distillation vs RL for a small model at an equal compute budget, teacher sampling included.
Run: `python -m experiments.distill_vs_rl [steps=30] [--seeds 0 1] [--problems 384] [--k 2]`
(one process per seed can run in parallel; each rewrites the verdict over all seeds saved so far).

The student is the built-in tiny model (1.05M parameters) from the shared weak SFT cold start
(`sft-std`, ~20 % held-out). Three ways to spend the same budget B, per seed:
  grpo     GRPO on the student alone for `steps` steps (8 prompts x G=16); B is what it spent.
  distill  the teacher (experiments/teacher.py: 2.3M parameters, SFT by rlvr to >= 85 %) samples
           k completions for each of `problems` training problems at temperature 1; the strict
           verifier keeps the correct ones; the student is fine-tuned on them (SFT, lr 3e-4 or --sft-lr) for as
           many steps as the rest of B pays for.
  distill_grpo  the distill arm's student at half its SFT steps, then GRPO for the rest of B.
Compute is counted in FLOPs as 2N per token processed forward (generation, prompt included) and
6N per token trained forward + backward (GRPO updates only on sequences with a non-zero advantage:
the trainer skips the others). Held-out evaluation (200 greedy problems) is measurement, not
training, and is counted in neither FLOPs nor seconds. Wall seconds are this machine's, under
whatever load it had; the FLOP axis is the reproducible one. The teacher's own training is a sunk
cost: the verdict compares without it and states where the curves lie with it.
Writes runs/experiments/distill_vs_rl/{verdict.md,result.json,curves.png}.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

from experiments.common import (ROOT, accuracy_of, cold_start, plot_panels, run_arm, say,
                                write_problems, write_verdict)
from experiments.teacher import build_teacher, n_params, teacher_cost
from rlvr.tasks.arithmetic import ArithmeticTask

NAME = "distill_vs_rl"       # main() appends _sftlr<lr> for a non-default student SFT lr
SFT_LR = 3e-4           # 1e-3 (the cold start's) first drops the student to 2-5 %: see README
TASK = ArithmeticTask(3, "+")
PROMPT_TOKENS = 9        # <bos> + "347+285=": every 3-digit addition prompt
SFT_BATCH = 64


def grpo_points(records, n: int, flops0: float = 0.0, wall0: float = 0.0) -> tuple[list, float, float]:
    """[(flops, wall, accuracy)] at each eval of a GRPO run, and its total flops and seconds."""
    flops, wall, points = flops0, wall0, []
    for r in records:
        if "completions/total_tokens" in r:
            seqs = round(r["completions/total_tokens"] / r["completions/mean_length"])
            tokens = seqs * PROMPT_TOKENS + r["completions/total_tokens"]
            flops += 2 * n * tokens + 6 * n * tokens * r.get("active_fraction", 1.0)
            wall += r.get("timing/step", 0.0)
        if "eval/accuracy" in r:
            points.append((flops, wall, r["eval/accuracy"]))
    return points, flops, wall


def distill(seed: int, student: Path, teacher: Path, heldout: list, budget: float, problems: int,
            k: int) -> dict:
    """Teacher samples, verifier filter, student SFT until `budget` FLOPs; curve and a midpoint."""
    from rlvr.evaluation.metrics import greedy_accuracy
    from rlvr.models.policy import load_policy
    from rlvr.rollout.base import SamplingParams
    from rlvr.rollout.hf import HFEngine
    from rlvr.tasks.arithmetic import ArithmeticVerifier
    from rlvr.training.sft import SFTConfig, distill_pairs, sft

    verifiers = {"arithmetic": ArithmeticVerifier()}
    t_model, t_tok = load_policy(str(teacher))
    model, tok = load_policy(str(student))
    n_t, n_s = n_params(t_model), n_params(model)
    drawn = TASK.sample(random.Random(f"distill/{seed}"), problems)
    stats: dict = {}
    t0 = time.perf_counter()
    pairs = distill_pairs(HFEngine(t_model, t_tok), tok, drawn, verifiers, k,
                          SamplingParams(temperature=1.0, max_new_tokens=48), stats)
    teacher_wall = time.perf_counter() - t0
    teacher_flops = 2 * n_t * (stats["samples"] * PROMPT_TOKENS + stats["completion_tokens"])
    step_flops = 6 * n_s * SFT_BATCH * sum(len(p) + len(c) for p, c in pairs) / len(pairs)
    steps = max(1, int((budget - teacher_flops) // step_flops))
    every = max(1, steps // 6)
    mid = (steps // 2) // every * every or every
    say(f"distill seed {seed}: kept {len(pairs)}/{stats['samples']} teacher samples "
        f"({teacher_wall:.0f} s); {steps} SFT steps")
    engine, clock = HFEngine(model, tok), {"start": time.perf_counter(), "eval": 0.0}
    points, out = [], ROOT / NAME / f"distill_s{seed}"

    def evaluate(step: int) -> float:
        e0 = time.perf_counter()
        acc = greedy_accuracy(engine, heldout, verifiers, 48)["eval/accuracy"]
        wall = teacher_wall + e0 - clock["start"] - clock["eval"]
        points.append((teacher_flops + step * step_flops, wall, acc))
        if step == mid:
            model.save_pretrained(out / "mid")
            tok.save_pretrained(out / "mid")
        clock["eval"] += time.perf_counter() - e0
        say(f"  distill seed {seed} step {step}: {acc:.1%}")
        model.train()
        return acc

    def batches():
        rng = random.Random(f"distill-sft/{seed}")
        while True:
            yield [rng.choice(pairs) for _ in range(SFT_BATCH)]
    sft(model, tok, batches(), SFTConfig(steps=steps, lr=SFT_LR, warmup_steps=10, eval_every=every, seed=seed),
        evaluate=evaluate)
    if points[-1][0] < teacher_flops + steps * step_flops:
        evaluate(steps)
    mid_point = next(p for p in points if abs(p[0] - (teacher_flops + mid * step_flops)) < 1)
    return {"points": points, "kept": len(pairs), "samples": stats["samples"],
            "distinct_problems_kept": len({tuple(p) for p, _ in pairs}), "teacher_flops": teacher_flops,
            "teacher_wall": teacher_wall, "sft_steps": steps, "sft_step_flops": step_flops,
            "mid": {"path": str(out / "mid"), "flops": mid_point[0], "wall": mid_point[1]}}


def run_seed(seed: int, steps: int, student: Path, heldout_path: Path,
             problems: int, k: int, start_acc: float) -> dict:
    from rlvr.data import load_problems
    from rlvr.models.policy import load_policy

    n_s = n_params(load_policy(str(student))[0])
    common = [f"data.eval_path={heldout_path}", f"seed={seed}", "run.eval_every=10"]
    train = write_problems(ROOT / NAME / "data" / f"train_s{seed}.jsonl",
                           TASK.sample(random.Random(f"grpo/{seed}"), steps * 8 * 2))
    recs = run_arm(NAME, f"grpo_s{seed}", [f"model.path={student}", f"data.train_path={train}",
                                           f"grpo.steps={steps}", *common])
    pts, budget, wall = grpo_points(recs, n_s)
    arms = {"grpo": [(0.0, 0.0, start_acc)] + pts}
    heldout = load_problems(str(heldout_path), "arithmetic")
    teacher = build_teacher(TASK)      # after the GRPO arm: that one does not wait for the teacher
    d = distill(seed, student, teacher, heldout, budget, problems, k)
    arms["distill"] = [(0.0, 0.0, start_acc)] + d["points"]
    mid = d["mid"]
    per_step = budget / steps
    rest = max(1, round((budget - mid["flops"]) / per_step))
    recs = run_arm(NAME, f"distill_grpo_s{seed}", [f"model.path={mid['path']}", f"data.train_path={train}",
                                                   f"grpo.steps={rest}", *common])
    pts, _, _ = grpo_points(recs, n_s, mid["flops"], mid["wall"])
    arms["distill_grpo"] = [(0.0, 0.0, start_acc)] + [p for p in d["points"] if p[0] <= mid["flops"]] + pts
    return {"budget_flops": budget, "grpo_wall": wall, "student_params": n_s, "arms": arms,
            "distill": {k2: v for k2, v in d.items() if k2 != "points"}, "distill_grpo_steps": rest}


def at(points, budget: float) -> float:
    """Accuracy of the last eval made within `budget` FLOPs (NaN if none)."""
    within = [acc for f, _, acc in points if f <= budget * 1.02]
    return within[-1] if within else float("nan")


def sunk_teacher_flops(teacher: Path) -> tuple[float, float]:
    """(FLOPs, wall seconds) the teacher's own SFT cost: 6N per trained token."""
    from rlvr.models.tiny import build_tokenizer
    from rlvr.training.sft import encode_pair

    cost, tok = teacher_cost(teacher), build_tokenizer()
    sample = TASK.sample(random.Random("tokens"), 200)
    per_pair = sum(len(a) + len(b) for a, b in (encode_pair(tok, p, TASK.trace(p)) for p in sample)) / 200
    return 6 * cost["params"] * per_pair * cost["batch_size"] * cost["steps"], cost["wall_seconds"]


def main(steps: int = 30, seeds: tuple[int, ...] = (0, 1), problems: int = 384, k: int = 2,
         sft_lr: float = 3e-4) -> None:
    global NAME, SFT_LR   # a script's settings for this one process: every arm writes under NAME
    if sft_lr != SFT_LR:
        NAME, SFT_LR = f"{NAME}_sftlr{sft_lr:g}", sft_lr
    student = cold_start("std", TASK, 0.2)
    heldout = write_problems(ROOT / NAME / "data" / "heldout.jsonl", TASK.heldout(200))
    start_acc = accuracy_of(student, heldout)
    say(f"student cold start {start_acc:.1%} on the held-out set")
    done = ROOT / NAME / "done"
    done.mkdir(parents=True, exist_ok=True)
    for seed in seeds:
        t0 = time.perf_counter()
        r = run_seed(seed, steps, student, heldout, problems, k, start_acc)
        r["process_wall_seconds"] = round(time.perf_counter() - t0, 1)
        (done / f"seed_{seed}.json").write_text(json.dumps({"steps": steps, **r}))
    runs = {}
    for f in sorted(done.glob("seed_*.json")):
        r = json.loads(f.read_text())
        if r["steps"] == steps:
            runs[int(f.stem.split("_")[1])] = r
    teacher = build_teacher(TASK)
    teacher_acc = accuracy_of(teacher, heldout)
    verdict(runs, start_acc, teacher_acc, sunk_teacher_flops(teacher), teacher_cost(teacher), steps, problems, k)


FRACTIONS = (1 / 3, 2 / 3, 1.0)    # the GRPO arm's evals at 10, 20, 30 steps
NOISE = 0.10      # 200 held-out problems swing by 5-10 points between evals (README)


def compare(runs: dict) -> tuple[dict, list[str]]:
    """Per budget fraction: each arm's accuracy per seed, mean, spread, and the winner."""
    table, lines = {}, []
    for frac in FRACTIONS:
        accs = {arm: [at(r["arms"][arm], frac * r["budget_flops"]) for r in runs.values()]
                for arm in ("grpo", "distill", "distill_grpo")}
        mean = {a: sum(v) / len(v) for a, v in accs.items()}
        order = sorted(mean, key=mean.get, reverse=True)
        tie = mean[order[0]] - mean[order[1]] < NOISE
        table[frac] = {"per_seed": accs, "mean": mean,
                       "spread": {a: max(v) - min(v) for a, v in accs.items()},
                       "winner": None if tie else order[0], "leader": order[0]}
        lines.append(f"- {frac:.0%} of B: " + ", ".join(
            f"{a} {mean[a]:.1%} (seeds {' / '.join(f'{x:.1%}' for x in accs[a])})" for a in order)
            + f" [distill - grpo {mean['distill'] - mean['grpo']:+.1%}, distill_grpo - grpo "
              f"{mean['distill_grpo'] - mean['grpo']:+.1%}]"
            + (f" -> {order[0]} wins" if not tie else f" -> {order[0]} leads by under {NOISE:.0%}: "
               "a tie within noise"))
    return table, lines


def verdict(runs, start_acc, teacher_acc, sunk, tcost, steps, problems, k) -> None:
    budget = sum(r["budget_flops"] for r in runs.values()) / len(runs)
    table, lines = compare(runs)
    d0 = next(iter(runs.values()))["distill"]
    head = [f"# Distillation vs RL at equal compute ({steps} GRPO steps = B = {budget / 1e12:.2f} TFLOPs "
            f"per seed on average; seeds {list(runs)})", "",
            f"Student {next(iter(runs.values()))['student_params'] / 1e6:.2f}M parameters, cold start "
            f"{start_acc:.1%} held-out; teacher {tcost['params'] / 1e6:.2f}M parameters, {teacher_acc:.1%} "
            f"held-out (rlvr SFT, {tcost['steps']} steps). Teacher sampling: {problems} problems x k={k} "
            f"at temperature 1, kept {d0['kept']}/{d0['samples']} (seed {next(iter(runs))}), "
            f"{d0['teacher_flops'] / 1e12:.2f} TFLOPs = {d0['teacher_flops'] / budget:.0%} of B and "
            f"{d0['teacher_wall']:.0f} s; then {d0['sft_steps']} student SFT steps of "
            f"{d0['sft_step_flops'] / 1e9:.1f} GFLOPs (lr {SFT_LR:g}, 10 warmup steps).", "",
            "Held-out accuracy (200 problems) at fractions of B, teacher training NOT counted (sunk):"]
    wall = {s: {a: pts[-1][1] for a, pts in r["arms"].items()} for s, r in runs.items()}
    lines = head + lines + ["", "Wall seconds to spend each arm's budget on this machine (load varies): "
                            + "; ".join(f"seed {s}: " + ", ".join(f"{a} {w:.0f} s" for a, w in ws.items())
                                        for s, ws in wall.items())
                            + "; whole process per seed: " + ", ".join(
                                f"seed {s} {r.get('process_wall_seconds', float('nan')):.0f} s" for s, r in runs.items())]
    end = table[1.0]
    lines += ["", f"Counting the teacher's training too ({sunk[0] / 1e12:.1f} TFLOPs = {sunk[0] / budget:.1f} x B, "
                  f"{sunk[1]:.0f} s): every distillation point moves right by that much, so within B "
                  f"{'the distillation arms have no point at all: only GRPO has anything to show' if sunk[0] > budget else 'they lose the head start'}"
                  f"; counted in full, its share fits in one student's budget only once about "
                  f"{sunk[0] / budget:.0f} students share it (or when it already exists).",
              "", "Verdict (teacher as sunk cost): at the full budget "
              + (f"{end['winner']} wins ({end['mean'][end['winner']]:.1%} mean over seeds)" if end["winner"]
                 else f"no arm wins by {NOISE:.0%} or more ({end['leader']} leads)")
              + "; at a third of it " + (f"{table[FRACTIONS[0]]['winner']} wins" if table[FRACTIONS[0]]["winner"]
                                           else f"{table[FRACTIONS[0]]['leader']} leads within noise") + ". "
              + "Spread between seeds at B: " + ", ".join(f"{a} {v:.1%}" for a, v in end["spread"].items()) + "."]
    res = {"budget_flops_mean": budget, "cold_start_accuracy": start_acc, "teacher_accuracy": teacher_acc,
           "teacher_training": {"flops": sunk[0], **tcost}, "problems": problems, "k": k,
           "by_fraction": {str(f): v for f, v in table.items()},
           "seeds": {str(s): r for s, r in runs.items()}}

    def plot(path):
        series = lambda x: {f"{a}_s{s}": [(p[x] / (1e12 if x == 0 else 1), p[2]) for p in pts]
                            for s, r in runs.items() for a, pts in r["arms"].items()}
        plot_panels(path, [("held-out accuracy vs TFLOPs", series(0)),
                           ("held-out accuracy vs wall s", series(1))])
    write_verdict(NAME, res, lines, plot)


if __name__ == "__main__":
    import torch

    torch.set_num_threads(1)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("steps", nargs="?", type=int, default=30)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--problems", type=int, default=384, help="teacher: problems to sample")
    parser.add_argument("--k", type=int, default=2, help="teacher: samples per problem")
    parser.add_argument("--sft-lr", type=float, default=3e-4, help="student SFT lr on the teacher's samples")
    parser.add_argument("--verdict-only", action="store_true", help="rewrite the verdict from saved seeds")
    args = parser.parse_args()
    main(args.steps, () if args.verdict_only else tuple(args.seeds), args.problems, args.k, args.sft_lr)
