"""Summed vs per-term reward normalisation (GDPO) with three reward terms on the tiny model.
Run: `python -m experiments.reward_norm STEPS SFT_PATH` (SFT_PATH: the quickstart's cold start,
e.g. `rlvr quickstart run.dir=runs/qs grpo.steps=0` then runs/qs/sft), on the quickstart preset.

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
ROOT = Path("runs/experiments")
TERMS = ("arithmetic", "trace_format", "overlong")


def trace_format(completions, **kwargs) -> list[float]:
    """1.0 when the completion is column blocks then `>answer`, whatever the digits say."""
    return [1.0 if _TRACE.match(c.strip()) else 0.0 for c in completions]


def write_problems(path: Path, problems) -> Path:
    """JSONL rows `data.load_problems` reads, every row scored by `reward_funcs`; duplicates dropped."""
    path.parent.mkdir(parents=True, exist_ok=True)
    unique = {p.id: p for p in problems}.values()
    path.write_text("".join(json.dumps({"id": p.id, "prompt": p.prompt, "reference": p.reference,
                                        "verifier": "reward_funcs"}) + "\n" for p in unique))
    return path


def train_arm(name: str, arm: str, overrides: list[str]) -> list[dict]:
    """Train the quickstart preset with `overrides` in runs/experiments/NAME/ARM; its step lines."""
    import shutil

    from rlvr import config as config_mod
    from rlvr.monitor.log import read_metrics
    from rlvr.train import train

    out = ROOT / name / arm
    shutil.rmtree(out, ignore_errors=True)
    train(config_mod.load("quickstart", [f"run.dir={out}", "data.task=", "run.resume=never",
                                         "run.threads=1", "run.progress=false", "run.report=false",
                                         "run.save_every=0", *overrides]))
    return [r for r in read_metrics(out) if "event" not in r]


def mean_over(records: list[dict], key: str, first: int, last: int) -> float:
    vals = [r[key] for r in records if key in r and first <= r["step"] < last]
    return sum(vals) / len(vals) if vals else float("nan")


def main(steps: int, sft: str) -> None:
    from rlvr.tasks.arithmetic import ArithmeticTask

    d = ROOT / NAME / "data"
    train = write_problems(d / "train.jsonl", ArithmeticTask(3, "+").sample(random.Random(NAME), 2000))
    heldout = write_problems(d / "heldout.jsonl", ArithmeticTask(3, "+").heldout(200))
    terms = ("[{verifier: arithmetic}, {fn: experiments/reward_norm.py:trace_format, weight: 0.5}, "
             "{verifier: overlong, options: {max_length: 48, cache_length: 24}}]")
    common = [f"model.path={sft}", f"data.train_path={train}", f"data.eval_path={heldout}",
              f"data.reward_funcs={terms}", f"grpo.steps={steps}", f"run.eval_every={steps}"]
    result = {}
    for arm in ("sum", "per_term"):
        records = train_arm(NAME, arm, [*common, f"grpo.reward_norm={arm}"])
        result[arm] = {f"{t}/{when}": round(mean_over(records, f"rewards/{t}/mean", a, b), 3)
                       for t in TERMS for when, (a, b) in (("first5", (0, 5)), ("last5", (steps - 5, steps)))}
        result[arm]["heldout_accuracy"] = [r["eval/accuracy"] for r in records if "eval/accuracy" in r][-1]
        print(arm, result[arm], flush=True)
    (ROOT / NAME / "result.json").write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
