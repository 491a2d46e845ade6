"""Seconds per step of scoring: `score_groups` on a step of groups, as the training loop calls it.

Usage: `python bench/scoring.py code --workers N` | `python bench/scoring.py function --mode sync|async`.
`code`: 4 problems x 16 completions (`--group-size 4`: 16 x 4), each distinct code (no cache hits) whose one test case sleeps
0.2 s in the sandbox (a test's wall time, not its CPU, so that the figure measures how the calls
overlap rather than how many cores this host lends), `--workers` sandbox zygotes.
`function`: 8 problems x 16 completions (the quickstart's step) through a TRL reward function that
sleeps 0.5 s per call (`--mode async`: an `async def` awaiting `asyncio.sleep(0.5)`), in
`data.reward_workers` (`--workers`, default 2) worker processes.
Pools are started and warmed before timing; prints one JSON line {"seconds_per_step": ...} (the
median of `--steps` steps). Runs against whichever rlvr is importable (PYTHONPATH selects a tree).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rlvr.evaluation.metrics import score_groups
from rlvr.types import Completion, Group, Problem

FUNCS = '''
import asyncio, time
def sleepy(completions, **kwargs):
    time.sleep(0.5)
    return [1.0 for _ in completions]
async def sleepy_async(completions, **kwargs):
    await asyncio.sleep(0.5)
    return [1.0 for _ in completions]
'''


def step_groups(problems: int, g: int, verifier: str, text, step: int) -> list[Group]:
    return [Group(Problem(f"p{i}", "q", {"entry_point": "f", "cases": [{"args": [], "expected": 1}]}
                          if verifier == "code" else "1", verifier), [1],
                  [Completion(text(step, i, j), [1], [0.0], "stop") for j in range(g)])
            for i in range(problems)]


def code_verifiers(workers: int):
    from rlvr.verifiers.base import get_verifier

    v = get_verifier("code", workers=workers, timeout_s=10.0)
    return {"code": v}, 4, lambda s, i, j: (f"```python\nimport time\ndef f():\n    time.sleep(0.2)\n"
                                            f"    return 1  # {s}-{i}-{j}\n```")


def function_verifiers(mode: str, workers: int):
    from rlvr.verifiers.reward_funcs import RewardFunctionsVerifier

    d = Path(tempfile.mkdtemp())
    (d / "funcs.py").write_text(FUNCS)
    name = "sleepy" if mode == "sync" else "sleepy_async"
    try:
        v = RewardFunctionsVerifier(terms=[{"fn": f"{d}/funcs.py:{name}"}], workers=workers)
    except TypeError:   # a tree without reward_workers
        v = RewardFunctionsVerifier(terms=[{"fn": f"{d}/funcs.py:{name}"}])
    v.pool.warm()
    return {"reward_funcs": v}, 8, lambda s, i, j: f"{s}-{i}-{j}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["code", "function"])
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--mode", choices=["sync", "async"], default="sync")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--group-size", type=int, default=16, help="code: G (64 // G problems)")
    a = ap.parse_args()
    verifiers, problems, text = (code_verifiers(a.workers or 1) if a.what == "code"
                                 else function_verifiers(a.mode, a.workers or 2))
    name = next(iter(verifiers))
    g = a.group_size if a.what == "code" else 16
    problems = 64 // g if a.what == "code" else problems
    score_groups(step_groups(problems, g, name, text, -1), verifiers)   # warm-up step
    times, flags = [], set()
    for step in range(a.steps):
        groups = step_groups(problems, g, name, text, step)
        t0 = time.perf_counter()
        score_groups(groups, verifiers)
        times.append(time.perf_counter() - t0)
        flags |= {f for g in groups for c in g.completions for f in c.score.flags}
        rewards = [c.score.reward for g in groups for c in g.completions]
    for v in verifiers.values():
        v.close()
    print(json.dumps({"what": a.what, "mode": a.mode, "workers": a.workers, "group_size": g,
                      "seconds_per_step": round(statistics.median(times), 3),
                      "times": [round(t, 3) for t in times], "mean_reward": sum(rewards) / len(rewards),
                      "flags": sorted(flags)}))


if __name__ == "__main__":
    sys.exit(main())
