"""Per-stage timings and memory for `grpo_vs_trl.py`: where each trainer's step goes, and its peak RSS.

Stages are generate / verify / update. rlvr logs them itself (`timing/generate`, `timing/verify`,
`timing/update` in metrics.jsonl). TRL times its blocks with `trl.extras.profiling` but only hands
the figures to wandb/mlflow/trackio; `TrlStages` records them instead: generate is
`transformers.generate`, verify is `_calculate_rewards`, update is the step minus
`_prepare_inputs` (which holds generation, rewards and advantages).

`RssByTurn` samples the process's resident memory every 20 ms and keeps the peak seen while each
trainer held the turn. Both trainers live in one process, so each peak includes the other's idle
model and optimizer state; the figure before training (`idle`) says how much that is.
"""

from __future__ import annotations

import os
import statistics
import threading
import time

STAGES = ("generate", "verify", "update")


class TrlStages:
    """Seconds per TRL stage, one dict per step."""

    def __init__(self):
        self.steps: list[dict[str, float]] = []
        self._open: dict[str, float] = {}

    def install(self) -> None:
        from trl.extras.profiling import ProfilingContext

        record = self._open

        def log_metrics(ctx, duration: float) -> None:   # "GRPOTrainer.x" -> "x", summed per step
            key = ctx.name.split(".", 1)[-1]
            record[key] = record.get(key, 0.0) + duration

        ProfilingContext._log_metrics = log_metrics

    def end_step(self, step_seconds: float) -> None:
        got = dict(self._open)
        self._open.clear()
        generate = got.get("transformers.generate", got.get("transformers.generate_batch", 0.0))
        self.steps.append({"generate": generate, "verify": got.get("_calculate_rewards", 0.0),
                           "update": step_seconds - got.get("_prepare_inputs", 0.0)})


def rlvr_stages(rows: list[dict]) -> list[dict[str, float]]:
    return [{s: r.get(f"timing/{s}", 0.0) for s in STAGES} for r in rows]


def stage_summary(steps: list[dict[str, float]], step_secs: list[float], floors: list[dict[str, float]],
                  warmup: int) -> dict:
    """Median seconds of each stage, its share of the step, and floor ÷ stage (1.0 = at the floor)."""
    out = {}
    steps, step_secs, floors = steps[warmup:], step_secs[warmup:], floors[warmup:]
    for s in STAGES:
        secs = [st[s] for st in steps]
        entry = {"s": statistics.median(secs),
                 "share": statistics.median(st[s] / t for st, t in zip(steps, step_secs))}
        if floors and s in floors[0]:
            ratios = [f[s] / st[s] for f, st in zip(floors, steps) if st[s] > 0 and f[s] > 0]
            entry["floor_s"] = statistics.median(f[s] for f in floors)
            entry["of_floor"] = statistics.median(ratios) if ratios else float("nan")
        out[s] = entry
    return out


def stage_line(name: str, stages: dict) -> str:
    parts = []
    for s, e in stages.items():
        floor = f", {e['of_floor']:.0%} of floor {e['floor_s']:.2f} s" if "of_floor" in e else ""
        parts.append(f"{s} {e['s']:.2f} s ({e['share']:.0%}{floor})")
    return f"{name:5s} stages: " + "; ".join(parts)


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "?")
    except OSError:
        return "?"


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


class RssByTurn:
    """Peak resident memory (MB) while `turn` names each trainer; `idle` is the peak before training."""

    def __init__(self, interval: float = 0.02):
        self.turn, self.peak = "idle", {"idle": _rss_mb()}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, args=(interval,), daemon=True)
        self._thread.start()

    def _loop(self, interval: float) -> None:
        while not self._stop.is_set():
            rss, turn = _rss_mb(), self.turn
            self.peak[turn] = max(self.peak.get(turn, 0.0), rss)
            time.sleep(interval)

    def stop(self) -> dict:
        self._stop.set()
        self._thread.join()
        return {k: round(v) for k, v in self.peak.items()}
