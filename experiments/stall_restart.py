"""Stall and restart: a fixed easy problem set stalls GRPO; pass-rate re-filtering plus harder
problems restarts it.  Run: `python -m experiments.stall_restart [steps_per_phase]`.

Phase A trains the cold-started tiny model on a fixed set of 3-digit additions *without carries*
(the easy part of the task) with no curriculum: as the set is solved, more and more groups are
all-correct (zero variance) and held-out accuracy on general 3-digit addition (mostly with
carries) stops moving. Phase B continues from A's weights in two arms for the same number of
steps: `control` keeps the fixed set; `restart` adds harder problems (with carries) and turns on
the pass-rate curriculum, which retires the solved easy problems. Writes
runs/experiments/stall_restart/{verdict.md,result.json,curves.png}.
"""

from __future__ import annotations

import json
import random
import sys

from experiments.common import (ROOT, accuracy_of, alarms, cold_start, curve, evals, mean_over, plot_panels,
                                run_arm, say, write_problems, write_verdict)
from rlvr.tasks.arithmetic import ArithmeticTask, make_problem

NAME = "stall_restart"


def no_carry(rng: random.Random, n: int) -> list:
    out = []
    while len(out) < n:
        a = [rng.randint(1, 8), rng.randint(0, 9), rng.randint(0, 9)]
        b = [rng.randint(1, 9 - a[0]), rng.randint(0, 9 - a[1]), rng.randint(0, 9 - a[2])]
        p = make_problem(int("".join(map(str, a))), int("".join(map(str, b))), "+")
        if p.metadata["split"] == "train":
            out.append(p)
    return out


def main(steps: int = 30) -> None:
    sft = cold_start("std", ArithmeticTask(3, "+"), 0.2)
    d = ROOT / NAME / "data"
    easy = no_carry(random.Random("easy"), 32)
    hard = ArithmeticTask(3, "+").sample(random.Random("hard"), 480)
    fixed = write_problems(d / "fixed.jsonl", easy)
    mixed = write_problems(d / "restart.jsonl", easy + hard)
    heldout = write_problems(d / "heldout.jsonl", ArithmeticTask(3, "+").heldout(200))
    start_acc = accuracy_of(sft, heldout)
    say(f"cold start: held-out accuracy {start_acc:.1%}")
    # Temperature 0.5: groups of a problem the policy has learned come out all-correct, as they do
    # for real models late in training; at 1.0 the tiny model's sampled reward stays far below 1.
    data = [f"data.eval_path={heldout}", "run.eval_every=10", "data.heldout_size=200",
            "rollout.temperature=0.5"]
    a = run_arm(NAME, "A_fixed", [f"model.path={sft}", f"data.train_path={fixed}",
                                  f"grpo.steps={steps}", *data])
    start = ROOT / NAME / "A_fixed" / "final"
    control = run_arm(NAME, "B_control", [f"model.path={start}", f"data.train_path={fixed}",
                                          f"grpo.steps={steps}", *data])
    restart = run_arm(NAME, "B_restart", [f"model.path={start}", f"data.train_path={mixed}",
                                          f"grpo.steps={steps}", "curriculum.enabled=true",
                                          *data])
    verdict([{"step": 0, "eval/accuracy": start_acc}] + a, control, restart, steps)


def verdict(a, control, restart, steps: int, cost: dict | None = None) -> None:
    k = max(1, steps // 3)
    zv = lambda recs, lo, hi: mean_over(recs, "frac_reward_zero_std", lo, hi)
    acc = lambda recs: evals(recs)[-1][1]
    res = {"steps_per_phase": steps,
           "fixed_zero_std_first": zv(a, 0, k), "fixed_zero_std_last": zv(control, steps - k, steps),
           "fixed_reward_first": mean_over(a, "reward/mean", 0, k),
           "fixed_reward_last": mean_over(control, "reward/mean", steps - k, steps),
           "A_eval": evals(a), "control_eval": evals(control), "restart_eval": evals(restart),
           "restart_zero_std_last": zv(restart, steps - k, steps),
           "alarms": {"A": alarms(a), "control": alarms(control), "restart": alarms(restart)},
           "A_final": acc(a), "control_final": acc(control), "restart_final": acc(restart),
           **(cost or {})}
    stalled = res["fixed_zero_std_last"] > res["fixed_zero_std_first"] + 0.05 and \
        res["control_final"] <= res["A_final"] + 0.02
    resumed = res["restart_final"] > res["control_final"] + 0.05 and \
        res["restart_zero_std_last"] < res["fixed_zero_std_last"]
    lines = [f"# Stall and restart ({steps} steps per phase, 8 prompts x G=16, temperature 0.5)", "",
             f"Fixed set of 32 no-carry problems, no curriculum (phase A, then B control, {2 * steps} "
             f"steps): training reward {res['fixed_reward_first']:.2f} -> {res['fixed_reward_last']:.2f}, "
             f"frac_reward_zero_std {res['fixed_zero_std_first']:.2f} (first {k} steps) -> "
             f"{res['fixed_zero_std_last']:.2f} (last {k}); held-out accuracy {_fmt(evals(a))} | "
             f"{_fmt(evals(control), steps)}.",
             f"Restart from the end of phase A (+480 problems with carries, pass-rate curriculum, "
             f"{steps} steps): frac_reward_zero_std {res['restart_zero_std_last']:.2f} (last {k}), "
             f"held-out {_fmt(evals(restart), steps)}.",
             f"Alarms: {res['alarms']}", "",
             f"Verdict: stall {'SHOWN' if stalled else 'NOT shown'}; restart "
             f"{'SHOWN' if resumed else 'NOT shown'} (restart {res['restart_final']:.1%} vs control "
             f"{res['control_final']:.1%} held-out after phase B; {res['A_final']:.1%} after phase A)."]
    shift = lambda pts: [(s + steps, v) for s, v in pts]

    def plot(path):
        plot_panels(path, [
            ("frac_reward_zero_std", {"A fixed": curve(a, "frac_reward_zero_std"),
                                      "B control": shift(curve(control, "frac_reward_zero_std")),
                                      "B restart": shift(curve(restart, "frac_reward_zero_std"))}),
            ("held-out accuracy", {"A fixed": evals(a), "B control": shift(evals(control)),
                                   "B restart": shift(evals(restart))})])
    write_verdict(NAME, res, lines, plot)


def _gain(points, since: int) -> float:
    before = [v for s, v in points if s <= since]
    return points[-1][1] - (before[-1] if before else points[0][1])


def _fmt(points, offset: int = 0) -> str:
    return " -> ".join(f"{v:.1%}@{s + offset}" for s, v in points)


def verdict_from_runs(steps: int) -> None:
    """Rewrite the verdict from the metrics already in ROOT/NAME (no training)."""
    from experiments.common import read_metrics

    runs = [read_metrics(ROOT / NAME / arm) for arm in ("A_fixed", "B_control", "B_restart")]
    old = json.loads((ROOT / NAME / "result.json").read_text())
    start = old["A_eval"][0]
    cost = {k: old[k] for k in ("process_cpu_seconds", "process_wall_seconds")}
    verdict([{"step": start[0], "eval/accuracy": start[1]}] + runs[0], runs[1], runs[2], steps, cost)


if __name__ == "__main__":
    import torch

    torch.set_num_threads(1)
    if "--verdict-only" in sys.argv:
        verdict_from_runs(int(sys.argv[1]))
    else:
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 30)
