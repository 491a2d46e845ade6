"""Stall and restart on the real model (issue 47): after a cold start and 60 GRPO steps the held-out
accuracy stops improving; does the seeds' remedy (drop the groups without signal and refill, re-estimate
pass rates, add harder problems) restart it, against the same run simply continued?

Both arms resume the stalled run's last checkpoint (weights, AdamW state, the curriculum's pass-rate
estimates, the RNG streams) in their own run directories and train `steps` more:

- continue: nothing changed (the preset's curriculum as it was);
- restart: dynamic sampling on (zero-variance groups dropped, the batch refilled from the curriculum,
  up to 3 rounds), deferred and retired problems re-checked every `recheck` steps instead of once an
  epoch (150 steps here), and GSM8K, the multi-step set, drawn at weight 1 instead of 0.1.

Each arm is then evaluated like public_math (greedy on the four held-out sets and the constraint
prompts). The verdict sets the stalled run's step metrics beside each arm's.

    python -m experiments.public_math data=../shared/data seed=0 max_new=96 cold_start=200 steps=60 threads=2
    python -m experiments.stall_restart base=run_s0_t96_g0.1_cs200_th2 arms=continue   # the two arms can
    python -m experiments.stall_restart base=run_s0_t96_g0.1_cs200_th2 arms=restart    # run side by side
    python -m experiments.stall_restart base=run_s0_t96_g0.1_cs200_th2                 # the verdict

`base_k` (default 4) is the `k` the base run was evaluated with, so its evaluation is reused.

Writes runs/experiments/stall_restart_<base>/{verdict.md,result.json,curves.png}.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import yaml

from rlvr.monitor.log import read_metrics

from experiments.common import ROOT, plot_panels, say, write_verdict
from experiments.public_math import RLVR, SETS, evaluate

OUT = ROOT / "public_math"


def arm_config(base: str, arm: str, steps: int, threads: int, recheck: int) -> tuple[Path, Path]:
    """The arm's YAML (the stalled run's own config, changed as the arm says) and its run dir."""
    cfg = yaml.safe_load((OUT / f"{base}.yaml").read_text())
    start = int(cfg["grpo"]["steps"])
    run = OUT / f"stall_{arm}_{base[4:]}"
    ckpts = sorted((OUT / base / "checkpoints").glob("step-*"))
    if not ckpts:
        raise SystemExit(f"{OUT / base}/checkpoints has no step-* checkpoint to resume")
    cfg["run"].update({"dir": str(run), "resume": str(ckpts[-1]), "resume_allow_changes": True,
                       "threads": threads})
    cfg["grpo"]["steps"] = start + steps
    if arm == "restart":
        cfg["dynamic_sampling"] = {"enabled": True, "max_rounds": 3}
        cfg["curriculum"]["recheck_every"] = recheck
        for source in cfg["data"]["mix"]:
            if source["name"] == "gsm8k":
                source["weight"] = 1.0
    elif arm != "continue":
        raise SystemExit(f"arms: continue or restart, not {arm!r}")
    path = OUT / f"{run.name}.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path, run


def train_arm(base: str, arm: str, steps: int, threads: int, recheck: int) -> dict:
    path, run = arm_config(base, arm, steps, threads, recheck)
    if not (run / "final").exists():
        t0 = time.perf_counter()
        subprocess.run([*RLVR, "train", str(path)], check=True)
        # the largest child this process has waited for (kB on Linux): this arm's train, or an
        # earlier arm's train or evaluation when one process runs both arms
        (run / "arm_wall.json").write_text(json.dumps({
            "wall_seconds": round(time.perf_counter() - t0, 1),
            "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1e6, 2)}))
    ev = evaluate(str(run / "final"), OUT, f"after_{run.name}", 96, threads)
    return {"arm": arm, "run": str(run), **json.loads((run / "arm_wall.json").read_text()), "eval": ev}


def _steps(run: Path) -> list[dict]:
    return [m for m in read_metrics(run) if "reward/mean" in m]


def _mean(ev: dict) -> float:
    return sum(ev[n]["greedy_accuracy"] for n in SETS) / len(SETS)


def main(argv: list[str]) -> None:
    args = dict(a.split("=", 1) for a in argv)
    base = args.get("base", "run_s0_t96_g0.1_cs200_th2")
    steps, threads = int(args.get("steps", 40)), int(args.get("threads", 1))
    recheck = int(args.get("recheck", 10))
    arms = args.get("arms", "continue,restart").split(",")
    results = {arm: train_arm(base, arm, steps, threads, recheck) for arm in arms}
    if len(results) < 2:
        say(f"{arms} done; run without arms= for the verdict")
        return
    # the base run's own evaluation (public_math's, with its k), not a second one
    base_k = int(args.get("base_k", 4))
    stalled = evaluate(str(OUT / base / "final"), OUT, f"after_{base[4:]}", 96, threads, base_k)
    first = _steps(OUT / base)
    curves = {arm: _steps(Path(r["run"])) for arm, r in results.items()}

    def window(rows: list[dict], key: str) -> str:
        head, tail = [sum(m.get(key, 0) for m in part) / len(part) for part in (rows[:10], rows[-10:])]
        return f"{head:.2f} -> {tail:.2f}"

    def row(label: str, stalled_cell: str, cells) -> str:
        return f"| {label} | {stalled_cell} | " + " | ".join(cells) + " |"

    evs = [r["eval"] for r in results.values()]
    lines = [f"# stall and restart from {base}, {steps} more steps, seed of the base run", "",
             row("", "stalled (end of the base run)", results), "| --- | --- |" + " --- |" * len(results)]
    for n in (*SETS, "constraints"):
        lines.append(row(f"{n} greedy", f"{stalled[n]['greedy_accuracy']:.3f}",
                         (f"{e[n]['greedy_accuracy']:.3f}" for e in evs)))
    lines.append(row("mean greedy, four math sets", f"{_mean(stalled):.3f}",
                     (f"{_mean(e):.3f}" for e in evs)))
    for key in ("frac_reward_zero_std", "reward/mean", "completions/mean_length"):
        lines.append(row(f"{key}, first -> last 10 steps", window(first, key),
                         (window(c, key) for c in curves.values())))
    lines.append(row("wall (rlvr train)", "", (f"{r['wall_seconds']:.0f} s" for r in results.values())))
    lines.append(row("peak RSS (rlvr train; 0: not recorded)", "",
                     (f"{r.get('peak_rss_gb', 0):.1f} GB" for r in results.values())))
    write_verdict(f"stall_restart_{base}", {"base": base, "steps": steps, "stalled": stalled,
                                             "arms": results, "base_steps": first, "arm_steps": curves},
                  lines, lambda p: plot_panels(p, [
                      (key, {"stalled run": [(m["step"], m.get(key, 0.0)) for m in first],
                             **{arm: [(m["step"], m.get(key, 0.0)) for m in c] for arm, c in curves.items()}})
                      for key in ("frac_reward_zero_std", "reward/mean")]))


if __name__ == "__main__":
    main(sys.argv[1:])
