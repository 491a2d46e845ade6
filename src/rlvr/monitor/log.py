"""Metrics out of the loop: `metrics.jsonl`, TensorBoard scalars, transcripts and the console.

`metrics.jsonl` is the record of a run: one JSON object per line, each with `step`. Step lines
hold the metrics; eval lines hold `eval/*` keys; event lines hold `event` (alarms). On resume the
file is cut back to the byte offset saved in the checkpoint, so lines after it are written once.
TensorBoard is best-effort: a missing or broken tensorboard install never stops training.
Other trackers (`rlvr.monitor.trackers`) get every line written here; on resume, after the cut,
they get the kept lines again and skip the steps they already hold (a tracker killed with the run
may have lost its unflushed tail, which this refills). Ranks other than 0 under torchrun log to a
`NullLog`: the same methods, nothing written.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any, Sequence

from rlvr.monitor import completions
from rlvr.types import Group

NON_DETERMINISTIC_PREFIXES = ("timing/", "time", "tokens_per_s")


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class MetricsLog:
    def __init__(self, run_dir: Path, tensorboard: bool = True, trackers: Any = None):
        self.trackers = trackers        # a `trackers.Trackers`, or None
        self.path = run_dir / "metrics.jsonl"
        self.transcripts = run_dir / "transcripts.jsonl"
        self.completions = run_dir / completions.FILE
        self.t0 = time.time()
        self._tb = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
                self._tb = SummaryWriter(str(run_dir / "tensorboard"))
            except Exception:  # tensorboard is optional at run time
                self._tb = None

    def offsets(self) -> dict[str, int]:
        """Byte sizes of the JSONL files, and the row count of completions.parquet."""
        out = {str(p.name): p.stat().st_size if p.exists() else 0 for p in (self.path, self.transcripts)}
        out[completions.FILE] = completions.row_count(self.completions)
        return out

    def truncate_to(self, offsets: dict[str, int]) -> None:
        """Drop lines written after a checkpoint (they will be written again)."""
        for p in (self.path, self.transcripts):
            size = offsets.get(p.name, 0)
            if p.exists() and p.stat().st_size > size:
                with p.open("r+b") as f:
                    f.truncate(size)
        completions.truncate(self.completions, offsets.get(completions.FILE, 0))
        if self.trackers is not None:
            self._replay()

    def _replay(self) -> None:
        """The kept lines and completion tables to the trackers, in the order they were written
        (a step's table after its lines, before any line of a later step)."""
        tables: dict[int, list[dict[str, Any]]] = {}
        for row in completions.read(self.completions):
            tables.setdefault(row["step"], []).append(row)
        pending = sorted(tables)
        for record in read_metrics(self.path.parent):
            while pending and "step" in record and record["step"] > pending[0]:
                step = pending.pop(0)
                self.trackers.table(step, "completions", tables[step])
            self.trackers.write(record)
        for step in pending:
            self.trackers.table(step, "completions", tables[step])

    def write(self, record: dict[str, Any]) -> None:
        record = {k: _clean(v) for k, v in record.items()}
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
            f.flush()
            os.fsync(f.fileno())
        if self._tb is not None and "step" in record:
            for key, value in record.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool) and key != "step":
                    self._tb.add_scalar(key, value, record["step"])
        if self.trackers is not None:
            self.trackers.write(record)

    def write_transcripts(self, step: int, groups: Sequence[Group], advantages) -> None:
        """The best- and worst-advantage completion of the step, with reward, flags, advantage."""
        flat = [(float(advantages[p, g]), p, g) for p, grp in enumerate(groups)
                for g in range(len(grp.completions))]
        if not flat:
            return
        picks = {"best": max(flat), "worst": min(flat)}
        with self.transcripts.open("a", encoding="utf-8") as f:
            for kind, (adv, p, g) in picks.items():
                c, problem = groups[p].completions[g], groups[p].problem
                f.write(json.dumps({
                    "step": step, "kind": kind, "problem_id": problem.id,
                    "prompt": problem.prompt if isinstance(problem.prompt, str)
                    else json.dumps(problem.prompt),
                    "completion": c.text, "reward": c.score.reward if c.score else None,
                    "advantage": adv, "flags": list(c.score.flags) if c.score else [],
                    "finish_reason": c.finish_reason}) + "\n")

    def write_completions(self, step: int, groups: Sequence[Group], advantages) -> None:
        """Every completion of the step: rows of completions.parquet, and a table for the trackers."""
        rows = completions.completion_rows(step, groups, advantages)
        completions.append(self.completions, rows)
        if self.trackers is not None:
            self.trackers.table(step, "completions", rows)

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()
        if self.trackers is not None:
            self.trackers.close()


def read_metrics(run_dir: Path) -> list[dict[str, Any]]:
    path = Path(run_dir) / "metrics.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class NullLog:
    """The metrics log of ranks other than 0: the same methods, nothing written."""

    def __init__(self):
        self.t0 = time.time()

    def write(self, record: dict[str, Any]) -> None:
        return None

    def write_transcripts(self, step, groups, advantages) -> None:
        return None

    def write_completions(self, step, groups, advantages) -> None:
        return None

    def offsets(self) -> dict[str, int]:
        return {}

    def truncate_to(self, offsets: dict[str, int]) -> None:
        return None

    def close(self) -> None:
        return None
