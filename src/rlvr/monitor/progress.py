"""The console: a progress bar with ETA and the headline metrics (rich) on a terminal, or, without
a bar (`run.progress=false`, or stdout is not a terminal: a batch job's log), a plain metrics line
every `plain_every` steps and at the last step, flushed at once, so a log shows how far a run got.
"""

from __future__ import annotations

import time
from typing import Any


def plain_line(done: int, total: int, record: dict[str, Any], elapsed: float, start: int = 0) -> str:
    """`step 10/60  reward 0.312  acc 0.250  len 12.4  0.52 s/step  eta 26 s` (eta from this run's pace)."""
    pace = elapsed / max(1, done - start)
    parts = [f"step {done}/{total}", f"reward {record.get('reward/mean', 0):.3f}",
             f"acc {record.get('accuracy', 0):.3f}", f"len {record.get('completions/mean_length', 0):.1f}"]
    for key in ("loss", "kl", "entropy"):
        if isinstance(record.get(key), (int, float)):
            parts.append(f"{key} {record[key]:.4g}")
    parts += [f"{record.get('timing/step', 0):.2f} s/step", f"eta {pace * (total - done):.0f} s"]
    return "  ".join(parts)


class Progress:
    def __init__(self, total: int, start: int = 0, enabled: bool = True, label: str = "GRPO",
                 plain_every: int = 0):
        self.total, self.start, self.enabled, self.label = total, start, enabled, label
        self.plain_every = plain_every  # without a bar: a plain line every this many steps (0: none)
        self._bar: Any = None       # rich's Progress once entered, imported only then
        self._t0 = time.perf_counter()

    def __enter__(self) -> "Progress":
        if self.enabled:
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress as RichProgress,
                                       TextColumn, TimeElapsedColumn, TimeRemainingColumn)
            self._bar = RichProgress(TextColumn("[bold]{task.description}"), BarColumn(),
                                     MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("eta"),
                                     TimeRemainingColumn(), TextColumn("{task.fields[info]}"))
            self._bar.__enter__()
            self._task = self._bar.add_task(self.label, total=self.total, completed=self.start, info="")
        return self

    def update(self, done: int, record: dict[str, Any]) -> None:
        if self._bar is None:
            if self.plain_every and (done % self.plain_every == 0 or done == self.total):
                print(plain_line(done, self.total, record, time.perf_counter() - self._t0, self.start),
                      flush=True)
            return
        info = (f"reward {record.get('reward/mean', 0):.3f}  acc {record.get('accuracy', 0):.3f}  "
                f"len {record.get('completions/mean_length', 0):.1f}  "
                f"{record.get('timing/step', 0):.2f}s/step")
        self._bar.update(self._task, completed=done, info=info)

    def note(self, text: str) -> None:
        if self._bar is not None:
            self._bar.console.print(text)
        else:
            print(text, flush=True)

    def __exit__(self, *exc) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)
