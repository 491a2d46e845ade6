"""Budget: curriculum + dynamic sampling vs neither, compared at an equal number of generated
completions; plus curriculum alone (the quickstart with the curriculum on).
Run: `python -m experiments.budget [steps] [--low 0.0]`.

All arms start from the same cold start on the quickstart's task (3-digit addition, 8 prompts x
G=16, constant lr) and are evaluated on the same 200 held-out problems every 5 steps. `neither`
is the quickstart (fresh problems each step); `curriculum` keeps problems with pass rate in
[0.1, 0.9] from a 2048-problem pool; `curriculum_ds` adds DAPO dynamic sampling (up to 2 rounds
per step); `dynamic_sampling` is DAPO's filter alone over fresh problems. Each eval point is
placed at the completions generated so far; arms are compared at the largest budget all of them
reached. Writes runs/experiments/budget/{verdict.md,result.json,
curves.png}.
"""

from __future__ import annotations

import sys

from experiments.common import (accuracy_of, alarms, cold_start, curve, mean_over, plot_panels,
                                run_arm, say, write_problems, write_verdict, ROOT)
from rlvr.tasks.arithmetic import ArithmeticTask

NAME = "budget"
GEN = "dynamic/generated_completions"
TARGET = 0.6            # held-out accuracy the quickstart comparison times


def main(steps: int = 40, low: float = 0.1) -> None:
    """`low`: the curriculum band's lower edge for both curriculum arms (0 keeps every unsolved problem)."""
    name = NAME if low == 0.1 else f"{NAME}_low{low:g}"
    band = [f"curriculum.low={low}"]
    sft = cold_start("std", ArithmeticTask(3, "+"), 0.2)
    heldout = write_problems(ROOT / name / "heldout.jsonl", ArithmeticTask(3, "+").heldout(200))
    start_acc = accuracy_of(sft, heldout)
    say(f"cold start: held-out accuracy {start_acc:.1%}")
    common = [f"model.path={sft}", "data.task=arithmetic", "data.heldout_size=200", "run.eval_every=5"]
    arms = {
        "neither": run_arm(name, "neither", [*common, f"grpo.steps={steps}"]),
        "curriculum": run_arm(name, "curriculum", [*common, f"grpo.steps={steps}",
                                                   "curriculum.enabled=true", *band]),
        "curriculum_ds": run_arm(name, "curriculum_ds", [*common, f"grpo.steps={steps * 2 // 3}",
                                                         "curriculum.enabled=true", *band,
                                                         "dynamic_sampling.enabled=true",
                                                         "dynamic_sampling.max_rounds=2"]),
        "dynamic_sampling": run_arm(name, "dynamic_sampling", [*common, f"grpo.steps={steps * 2 // 3}",
                                                               "dynamic_sampling.enabled=true",
                                                               "dynamic_sampling.max_rounds=2"]),
    }
    verdict(arms, start_acc, name)


def _seconds_to(records, target: float) -> float | None:
    """Wall seconds from the run's start to the step before the first eval at or above target."""
    now = 0.0
    for r in records:
        now = r.get("time", now) if "reward/mean" in r else now
        if r.get("eval/accuracy", -1) >= target:
            return round(now, 1)
    return None


def by_budget(records) -> list[tuple[float, float]]:
    """(completions generated before the eval, held-out accuracy) for each eval line."""
    spent, out = 0.0, [(0.0, None)]
    for r in records:
        if GEN in r:
            spent += r[GEN]
        if "eval/accuracy" in r:
            out.append((spent, r["eval/accuracy"]))
    return out[1:]


def at_budget(points, budget: float) -> float:
    within = [acc for spent, acc in points if spent <= budget]
    return within[-1] if within else float("nan")


def verdict(arms, start_acc: float, name: str = NAME) -> None:
    curves = {a: [(0.0, start_acc)] + by_budget(r) for a, r in arms.items()}
    budget = min(pts[-1][0] for pts in curves.values())
    res = {"cold_start_accuracy": start_acc, "equal_budget_completions": budget, "arms": {}}
    lines = [f"# Budget (cold start {start_acc:.1%}; compared at {budget:.0f} generated completions)", ""]
    for arm, recs in arms.items():
        steps = [r for r in recs if "reward/mean" in r]
        info = {"accuracy_at_budget": at_budget(curves[arm], budget), "final_accuracy": curves[arm][-1][1],
                "total_completions": curves[arm][-1][0], "steps": len(steps),
                "zero_std": mean_over(recs, "frac_reward_zero_std", 0, 10 ** 6),
                "completions_per_kept_group": mean_over(recs, "dynamic/completions_per_kept_group", 0, 10 ** 6),
                "train_seconds": sum(r.get("timing/step", 0.0) for r in steps),
                "seconds_to_target": _seconds_to(recs, TARGET),
                "steps_to_target": next((r["step"] for r in recs if r.get("eval/accuracy", -1) >= TARGET), None),
                "curve": curves[arm], "alarms": alarms(recs)}
        res["arms"][arm] = info
        lines.append(f"{arm}: {info['steps']} steps, {info['total_completions']:.0f} completions, "
                     f"held-out {info['accuracy_at_budget']:.1%} at the equal budget "
                     f"(final {info['final_accuracy']:.1%}); mean frac_reward_zero_std "
                     f"{info['zero_std']:.2f}; training time {info['train_seconds']:.0f} s; "
                     f"reached {TARGET:.0%} at step {info['steps_to_target']}"
                     + (f"; {info['completions_per_kept_group']:.1f} completions per kept group"
                        if "dynamic" in arm or arm.endswith("_ds") else ""))
    a = res["arms"]
    lines += ["", f"Verdict: at {budget:.0f} completions, curriculum + dynamic sampling reaches "
                  f"{a['curriculum_ds']['accuracy_at_budget']:.1%} vs {a['neither']['accuracy_at_budget']:.1%} "
                  f"for neither ({'better' if a['curriculum_ds']['accuracy_at_budget'] > a['neither']['accuracy_at_budget'] else 'not better'}); "
                  f"curriculum alone {a['curriculum']['accuracy_at_budget']:.1%}; dynamic sampling alone "
                  f"{a['dynamic_sampling']['accuracy_at_budget']:.1%}."]

    def plot(path):
        plot_panels(path, [("held-out accuracy vs completions", curves),
                           ("frac_reward_zero_std vs step", {k: curve(r, "frac_reward_zero_std")
                                                             for k, r in arms.items()})])
    write_verdict(name, res, lines, plot)


if __name__ == "__main__":
    import torch

    torch.set_num_threads(1)
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("steps", nargs="?", type=int, default=40)
    parser.add_argument("--low", type=float, default=0.1, help="curriculum.low for the curriculum arms")
    args = parser.parse_args()
    main(args.steps, args.low)
