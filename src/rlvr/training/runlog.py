"""The run log: one metrics line per step, alarms, transcripts, the progress bar, the NaN guard.

`RunLog.step` turns the step's groups, the update's statistics, the log's own timings (`timed`:
the update) and the metrics the other parts returned (the rollout source's: generation, dynamic
sampling, behaviour, staleness, curriculum, weight sync) into the step's line of `metrics.jsonl`,
in a fixed key order: step, time, the group metrics, the update's statistics, timings (the
returned `timing/*` first), then the other metrics in the order returned. `RunLog.steps` starts
each step with no timings and a fresh peak-memory count (on a CPU, every few steps, the C heap
trimmed: `Device.reset_peak_memory`).

State (`state_dict`, top-level checkpoint keys): the metrics-file offsets (a resumed run truncates
the files back to them, so no line or completions.parquet row is written twice), the doctor's
state, the count of consecutive NaN/inf updates and the reward terms whose failure was already
reported. On ranks other than 0 the output is a `NullLog` and nothing is written.
`run.log_completions` = N: every completion of every N-th step goes to completions.parquet
(`rlvr.monitor.completions`) and to the trackers as a table.
Not guaranteed: wall-clock fields (`time`, `timing/*`, `tokens_per_s`) repeat across runs.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Iterator, Sequence

import torch

from rlvr.config import Config
from rlvr.errors import UserError
from rlvr.monitor.stats import step_metrics
from rlvr.types import Group


def _terminal() -> bool:
    import sys

    return sys.stdout.isatty()


@contextlib.contextmanager
def timed(into: dict[str, Any], name: str) -> Iterator[None]:
    """Add the seconds the block takes to `into["timing/NAME"]`."""
    t0 = time.perf_counter()
    yield
    into[f"timing/{name}"] = into.get(f"timing/{name}", 0.0) + time.perf_counter() - t0


class RunLog:
    def __init__(self, cfg: Config, out, device, show_progress: bool = True):
        from rlvr.monitor.crashes import RewardCrashes
        from rlvr.monitor.doctor import Doctor

        self.out, self.device = out, device   # out: a MetricsLog or NullLog
        self.timings: dict[str, float] = {}     # the log's own timing/* of the current step
        self.doctor = Doctor(cfg)
        self.crashes, self.strict_rewards = RewardCrashes(), cfg.run.strict_rewards
        # a bar only on a terminal: in a batch job's log rich would print nothing until the end
        self.total, self.progress = cfg.grpo.steps, cfg.run.progress and show_progress and _terminal()
        self.log_every = cfg.run.log_every if show_progress else 0
        self.max_new_tokens = cfg.rollout.max_new_tokens
        self.transcripts_every, self.max_bad_steps = cfg.run.transcripts_every, cfg.run.max_bad_steps
        self.completions_every = cfg.run.log_completions
        self.bad_steps = 0
        self.bar: Any = None            # the Progress bar while steps() runs
        self.step_started = time.perf_counter()

    def steps(self, start: int) -> Iterator[int]:
        from rlvr.monitor.progress import Progress

        with Progress(self.total, start, enabled=self.progress, plain_every=self.log_every) as bar:
            self.bar = bar
            for step in range(start, self.total):
                self.begin_step(step)
                yield step

    def begin_step(self, step: int = 0) -> None:
        self.step_started = time.perf_counter()
        self.timings = {}
        self.device.reset_peak_memory(step)

    def timed(self, name: str):
        return timed(self.timings, name)

    def write(self, record: dict[str, Any]) -> None:
        self.out.write(record)

    def step(self, step: int, groups: Sequence[Group], advantages: torch.Tensor,
             stats: dict[str, float], metrics: dict[str, Any] | None = None) -> dict[str, Any]:
        """Write the step's metrics line, then its alarms and transcripts; stop after K bad updates.
        `metrics`: what the other parts returned for this step (their `timing/*` among them)."""
        metrics = metrics or {}
        timings = {k: v for k, v in metrics.items() if k.startswith("timing/")}
        timings.update(self.timings)
        timings["timing/step"] = time.perf_counter() - self.step_started
        record = {"step": step, "time": time.time() - self.out.t0}
        record.update(step_metrics(groups, advantages, self.max_new_tokens))
        record.update(stats)
        record.update(timings)
        record.update({k: v for k, v in metrics.items() if not k.startswith("timing/")})
        crash_metrics, crash_events = self.crashes.observe(step, groups)
        record.update(crash_metrics)
        record["tokens_per_s"] = record["completions/total_tokens"] / max(1e-9, timings["timing/step"])
        peak = self.device.peak_memory_gb()     # GPU only: CPU metrics files stay as they were
        if peak is not None:
            record["memory/peak_gb"] = peak
        self.out.write(record)
        self._report_crashes(crash_events)
        for alarm in self.doctor.observe(step, record):
            self.out.write({"step": step, "event": "alarm", **alarm})
            self.bar.note(f"[alarm] step {step}: {alarm['name']}: {alarm['message']} -> {alarm['action']}")
        if self.transcripts_every and step % self.transcripts_every == 0:
            self.out.write_transcripts(step, groups, advantages)
        if self.completions_every and step % self.completions_every == 0:
            self.out.write_completions(step, groups, advantages)
        self.bar.update(step + 1, record)
        self._check_finite(step, stats)
        return record

    def _report_crashes(self, events: list[dict[str, Any]]) -> None:
        """Each reward term's first failure: an event line, the traceback on the console, and with
        run.strict_rewards the end of the run (the step's metrics line is already written)."""
        from rlvr.monitor.crashes import describe

        for event in events:
            self.out.write(event)
            self.bar.note(describe(event))
        if events and self.strict_rewards:
            e = events[0]
            raise UserError(f"stopping: reward term {e['term']!r} failed at step {e['step']} "
                            f"(run.strict_rewards=true): {e['error']}")

    def _check_finite(self, step: int, stats: dict[str, float]) -> None:
        """Count updates skipped for NaN/inf (the doctor raises the alarm); stop after K in a row."""
        bad = any(isinstance(v, float) and v != v for v in stats.values())
        self.bad_steps = self.bad_steps + 1 if bad else 0
        if self.bad_steps >= self.max_bad_steps:
            raise UserError(f"stopping: {self.bad_steps} updates in a row had NaN/inf loss or "
                            f"gradients (step {step}); lower grpo.lr or check the model dtype")

    def close(self) -> None:
        self.out.close()

    def state_dict(self) -> dict[str, Any]:
        return {"doctor": self.doctor.state_dict(), "metrics_offsets": self.out.offsets(),
                "bad_steps": self.bad_steps, **self.crashes.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.doctor.load_state_dict(state.get("doctor", {}))
        self.out.truncate_to(state["metrics_offsets"])
        self.bad_steps = state.get("bad_steps", 0)
        self.crashes.load_state_dict(state)
