"""What `rlvr report` reads from a run directory, read so that a damaged one still gives a page.

`load_run(run_dir)` gathers metrics.jsonl (step, eval and event lines), transcripts.jsonl,
summary.json, eval/eval.json and eval/*.png, and an experiment's verdict.md and top-level *.png, into
one `RunData`; `series` and `finite` pick the finite (step, value) pairs a chart can draw.
Guaranteed: missing files, malformed or half-written lines and non-object JSON read as absent, never
raise; NaN, inf, null and bools are never returned as numbers; an image over EMBED_LIMIT comes with
empty bytes (listed, not embedded). Not guaranteed: that a *.png holds a PNG (the page checks).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from rlvr.report import plots

EMBED_LIMIT = 8 * 2**20       # bytes: larger images are listed, not embedded


@dataclass
class RunData:
    name: str
    records: list[dict[str, Any]]       # step and eval lines
    events: list[dict[str, Any]]        # lines with an "event" key (alarms)
    transcripts: list[dict[str, Any]]
    summary: dict[str, Any] | None
    eval_json: dict[str, Any] | None
    eval_pngs: list[tuple[str, bytes]]
    verdict: str | None = None                              # an experiment's verdict.md
    figures: list[tuple[str, bytes]] | None = None          # its top-level *.png (curves.png)
    completions: list[dict[str, Any]] | None = None         # completions.parquet rows (run.log_completions)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """JSON objects of a .jsonl file; blank, malformed (e.g. half-written) and non-object lines
    are skipped. A missing file is empty."""
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict):
            rows.append(row)
    return rows


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _pngs(folder: Path) -> list[tuple[str, bytes]]:
    """(name, bytes) of folder/*.png; files over EMBED_LIMIT get empty bytes (listed, not embedded)."""
    return [(p.name, p.read_bytes() if p.stat().st_size <= EMBED_LIMIT else b"")
            for p in sorted(folder.glob("*.png")) if p.is_file()]


def load_run(run_dir: Path) -> RunData:
    lines = read_jsonl(run_dir / "metrics.jsonl")
    verdict = run_dir / "verdict.md"
    return RunData(name=run_dir.resolve().name,
                   records=[r for r in lines if "event" not in r],
                   events=[r for r in lines if "event" in r],
                   transcripts=read_jsonl(run_dir / "transcripts.jsonl"),
                   summary=_read_json(run_dir / "summary.json"),
                   eval_json=_read_json(run_dir / "eval" / "eval.json"),
                   eval_pngs=_pngs(run_dir / "eval"),
                   verdict=verdict.read_text(encoding="utf-8", errors="replace")
                   if verdict.is_file() else None,
                   figures=_pngs(run_dir), completions=_completions(run_dir))


def _completions(run_dir: Path) -> list[dict[str, Any]]:
    """The rows of completions.parquet, each with its row number; none when it is missing or
    cannot be read (a report never fails on it)."""
    from rlvr.monitor import completions

    try:
        rows = completions.read(run_dir / completions.FILE)
    except Exception:  # noqa: BLE001 - e.g. a file cut short by a full disk
        return []
    return [{**row, "row": i} for i, row in enumerate(rows)]


def finite(value: Any) -> float | None:
    """`value` as a float when it is a finite number (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def series(records: Sequence[dict[str, Any]], key: str) -> tuple[plots.Series, int]:
    """(steps, values) of `key` where both are finite, and how many present values were not."""
    xs, ys, dropped = [], [], 0
    for r in records:
        if key not in r:
            continue
        x, y = finite(r.get("step")), finite(r[key])
        if x is None or y is None:
            dropped += 1
            continue
        xs.append(x)
        ys.append(y)
    return (xs, ys), dropped
