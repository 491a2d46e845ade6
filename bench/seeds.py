"""Several interleaved runs of a benchmark, one process per seed, summarised across seeds.

Learning is reported as mean ± standard error over seeds (one seed says little: seed 0 and seed 1
of `grpo_vs_trl.py` once put TRL 12.5 points ahead and rlvr 2 points ahead); speed as the
median and range of the per-run ratios. `busy_process()` keeps one extra busy-looping process
alive for the duration (the "another process on one of the cores" condition), stopped by its pid.
The machine's load average is recorded before and after each run, because absolute timings on a
shared machine mean little without it.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path


def mean_se(xs: list[float]) -> dict:
    se = statistics.stdev(xs) / math.sqrt(len(xs)) if len(xs) > 1 else float("nan")
    return {"mean": statistics.mean(xs), "se": se, "min": min(xs), "max": max(xs), "values": xs}


@contextlib.contextmanager
def busy_process(enabled: bool):
    if not enabled:
        yield None
        return
    proc = subprocess.Popen([sys.executable, "-c", "while 1: pass"])
    try:
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


def run_seeds(script: Path, argv: list[str], seeds: list[int], busy: bool, say=print) -> dict:
    """`script argv --seed S` for each seed, sequentially; returns the summary (also printed)."""
    base = [a for a in _drop_flag(argv, "--seeds") if a != "--busy"]
    runs = []
    with busy_process(busy) as pid:
        if pid:
            say(f"busy process {pid} running during the runs")
        for seed in seeds:
            load_before = os.getloadavg()[0]
            out = subprocess.run([sys.executable, str(script), *base, "--seed", str(seed)],
                                 capture_output=True, text=True)
            sys.stdout.write(out.stdout)
            if out.returncode != 0:
                sys.stderr.write(out.stderr[-4000:])
                raise SystemExit(f"seed {seed} failed with exit status {out.returncode}")
            report = json.loads(out.stdout.strip().splitlines()[-1])
            report["load_avg_1min"] = [load_before, os.getloadavg()[0]]
            runs.append(report)
    summary = {"seeds": seeds, "busy_process": busy, "steps": runs[0]["steps"],
               "precision": runs[0]["precision"],
               "heldout_accuracy": {n: mean_se([r[f"accuracy_{n}"] for r in runs]) for n in ("rlvr", "trl")},
               "reward_last5": {n: mean_se([r[f"reward_{n}"] for r in runs]) for n in ("rlvr", "trl")},
               "ratio": {"median": statistics.median(r["ratio"] for r in runs),
                         "values": [r["ratio"] for r in runs]},
               "s_per_step": {n: [r[n]["s_per_step"] for r in runs] for n in ("rlvr", "trl")},
               "load_avg_1min": [r["load_avg_1min"] for r in runs]}
    acc = summary["heldout_accuracy"]
    say(f"held-out greedy accuracy after {summary['steps']} steps over seeds {seeds}: "
        f"rlvr {acc['rlvr']['mean']:.1%} ± {acc['rlvr']['se']:.1%}, "
        f"TRL {acc['trl']['mean']:.1%} ± {acc['trl']['se']:.1%} (mean ± standard error)")
    say(f"ratio (rlvr tok/s ÷ TRL tok/s): median {summary['ratio']['median']:.2f} of "
        f"{[round(x, 2) for x in summary['ratio']['values']]}; load average "
        f"{[[round(a, 1) for a in x] for x in summary['load_avg_1min']]}")
    print(json.dumps(summary))
    return summary


def _drop_flag(argv: list[str], flag: str) -> list[str]:
    """argv without `flag` and the values that follow it (up to the next option)."""
    out, skipping = [], False
    for a in argv:
        if a == flag:
            skipping = True
            continue
        if skipping and a.startswith("-") and not a.lstrip("-").isdigit():
            skipping = False
        if not skipping:
            out.append(a)
    return out
