"""Summed vs per-term reward normalisation (GDPO) with three reward terms on the tiny model.
Run: `python -m experiments.reward_norm [steps=20] [SFT_PATH]` (default: the cached cold start).

Terms: correctness (the strict `arithmetic` verifier, weight 1), the trace's format
(`trace_format` below, weight 0.5) and DAPO's overlong penalty (`overlong`, 0 up to 24 tokens, down
to -1 at 48), which a full 3-digit trace (31 tokens) always pays a little of. Both arms start from
the same cold start, see the same problems and seeds, and differ only in `grpo.reward_norm`.
Prints each arm's per-term means (rewards/<term>/mean) over the first and last 5 steps and its
held-out accuracy, and writes runs/experiments/reward_norm/result.json.
"""

from __future__ import annotations

import json
import random
import re
import sys
from pathlib import Path

_TRACE = re.compile(r"^(\d[+-]\d[+-]\d=\d\d\|)+>\d+$")
NAME = "reward_norm"
TERMS = ("arithmetic", "trace_format", "overlong")


def trace_format(completions, **kwargs) -> list[float]:
    """1.0 when the completion is column blocks then `>answer`, whatever the digits say."""
    return [1.0 if _TRACE.match(c.strip()) else 0.0 for c in completions]


def main(steps: int = 20, sft: str = "") -> None:
    from experiments.common import (ROOT, cold_start, evals, mean_over, run_arm, say, write_problems)
    from rlvr.tasks.arithmetic import ArithmeticTask

    model = Path(sft) if sft else cold_start("quickstart", ArithmeticTask(3, "+"), 0.2, min_steps=200)
    d = ROOT / NAME / "data"
    train = write_problems(d / "train.jsonl", ArithmeticTask(3, "+").sample(random.Random(NAME), 2000),
                           "reward_funcs")
    heldout = write_problems(d / "heldout.jsonl", ArithmeticTask(3, "+").heldout(200), "reward_funcs")
    terms = ("[{verifier: arithmetic}, {fn: experiments/reward_norm.py:trace_format, weight: 0.5}, "
             "{verifier: overlong, options: {max_length: 48, cache_length: 24}}]")
    common = [f"model.path={model}", f"data.train_path={train}", f"data.eval_path={heldout}",
              f"data.reward_funcs={terms}", f"grpo.steps={steps}", f"run.eval_every={steps}"]
    result = {}
    for arm in ("sum", "per_term"):
        records = run_arm(NAME, arm, [*common, f"grpo.reward_norm={arm}"])
        result[arm] = {f"{t}/{when}": round(mean_over(records, f"rewards/{t}/mean", a, b), 3)
                       for t in TERMS for when, (a, b) in (("first5", (0, 5)), ("last5", (steps - 5, steps)))}
        result[arm]["heldout_accuracy"] = evals(records)[-1][1]
        say(f"{arm}: {result[arm]}")
    (ROOT / NAME / "result.json").write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main(*(int(a) if i == 0 else a for i, a in enumerate(sys.argv[1:])))
