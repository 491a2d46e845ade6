"""A console progress bar with ETA and the headline metrics (rich); silent when disabled."""

from __future__ import annotations

from typing import Any


class Progress:
    def __init__(self, total: int, start: int = 0, enabled: bool = True, label: str = "GRPO"):
        self.total, self.start, self.enabled, self.label = total, start, enabled, label
        self._bar: Any = None       # rich's Progress once entered, imported only then

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
