"""Parser hack: a lenient verifier teaches the policy to hedge with several answers; the strict one
does not.  Run: `python -m experiments.parser_hack [steps]`.

Both arms start from the same cold start, SFT on traces of which about a quarter end with two
candidates (`>632 622`, see multi_answer_task.py), and train on the same 3-digit problems for the
same steps. `lenient` rewards a response if any candidate equals the answer; `strict` is the
built-in verifier (exactly one answer after the last `>`), audited only to flag hedges. Held-out
accuracy is always judged by the strict verifier. The multi-answer rate is the share of sampled
training completions with more than one candidate (verifier flag `multiple_answers`). Writes
runs/experiments/parser_hack/{verdict.md,result.json,curves.png}.
"""

from __future__ import annotations

import random
import sys

from experiments.common import (ROOT, accuracy_of, alarms, cold_start, curve, evals, mean_over,
                                plot_panels, run_arm, say, write_problems, write_verdict)
from experiments.multi_answer_task import MultiAnswerTask, register
from rlvr.tasks.arithmetic import ArithmeticTask

NAME = "parser_hack"
RATE = "behaviour/multi_answer_rate"


def main(steps: int = 60) -> None:
    register()
    sft = cold_start("hedge", MultiAnswerTask(3, "+"), 0.2)
    d = ROOT / NAME / "data"
    train = ArithmeticTask(3, "+").sample(random.Random("parser"), 2000)
    heldout = write_problems(d / "heldout.jsonl", ArithmeticTask(3, "+").heldout(200))
    start_acc = accuracy_of(sft, heldout)
    say(f"cold start: strict held-out accuracy {start_acc:.1%}")
    common = [f"model.path={sft}", f"data.eval_path={heldout}", f"grpo.steps={steps}",
              "run.eval_every=10"]
    arms = {}
    for arm, verifier in (("lenient", "arithmetic_lenient"), ("strict", "arithmetic_audited")):
        path = write_problems(d / f"train_{arm}.jsonl", train, verifier)
        arms[arm] = run_arm(NAME, arm, [*common, f"data.train_path={path}"])
    verdict(arms, steps, start_acc)


def verdict(arms, steps: int, start_acc: float) -> None:
    k = max(1, steps // 5)
    res = {"steps": steps, "cold_start_strict_accuracy": start_acc}
    for arm, recs in arms.items():
        res[arm] = {"multi_answer_first": mean_over(recs, RATE, 0, k),
                    "multi_answer_last": mean_over(recs, RATE, steps - k, steps),
                    "train_reward_last": mean_over(recs, "reward/mean", steps - k, steps),
                    "strict_heldout": evals(recs), "alarms": alarms(recs)}
    le, st = res["lenient"], res["strict"]
    shown = le["multi_answer_last"] > le["multi_answer_first"] + 0.05 and \
        st["multi_answer_last"] < st["multi_answer_first"]
    lines = [f"# Parser hack ({steps} steps per arm, 8 prompts x G=16; cold start strict accuracy "
             f"{start_acc:.1%})", ""]
    for arm in ("lenient", "strict"):
        r = res[arm]
        lines.append(f"{arm}: multi-answer rate {r['multi_answer_first']:.1%} (first {k} steps) -> "
                     f"{r['multi_answer_last']:.1%} (last {k}); training reward (own verifier) "
                     f"{r['train_reward_last']:.3f}; strict held-out accuracy "
                     + " -> ".join(f"{v:.1%}@{s}" for s, v in r["strict_heldout"]))
    lines += ["", f"Verdict: the lenient verifier {'teaches' if shown else 'does NOT clearly teach'} "
                  f"hedging: {le['multi_answer_last']:.1%} vs {st['multi_answer_last']:.1%} multi-answer "
                  f"responses at the end (lenient vs strict)."]

    def plot(path):
        plot_panels(path, [("multi-answer rate", {a: curve(r, RATE) for a, r in arms.items()}),
                           ("strict held-out accuracy", {a: [(0, start_acc)] + evals(r)
                                                         for a, r in arms.items()})])
    write_verdict(NAME, res, lines, plot)


if __name__ == "__main__":
    import torch

    torch.set_num_threads(1)
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 60)
