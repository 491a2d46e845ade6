"""Weights & Biases (the `wandb` extra): one W&B run per rlvr run, resumed by id.

Project from WANDB_PROJECT (default "rlvr"), mode from WANDB_MODE (offline writes under
`RUN_DIR/wandb`, to `wandb sync` later). Each metrics line is `run.log(values, step=step)`; W&B
merges the lines of one step into one row. Alarms are `run.alert`s; tables are `wandb.Table`s.
On resume the steps W&B already holds are skipped: online, those below the resumed run's
`starting_step`; offline, those in this run id's earlier offline files (read by `history`). W&B
writes those files in 32 KiB blocks, so a kill -9 loses the unflushed tail; the metrics log
replays its lines on resume and the lost steps are written again, the held ones never twice.
"""

from __future__ import annotations

import glob
import json
import os
import struct
import uuid
from pathlib import Path
from typing import Any, Iterator, Sequence

import wandb

_BLOCK, _HEADER = 32768, 7


def open_tracker(run_dir: Path, run_name: str, config: dict[str, Any], run_id: str | None):
    return WandbTracker(run_dir, run_name, config, run_id)


class WandbTracker:
    def __init__(self, run_dir: Path, run_name: str, config: dict[str, Any], run_id: str | None):
        self.run_id = run_id or uuid.uuid4().hex[:12]
        rows = history(run_dir, self.run_id) if run_id else []
        held = [int(row["_step"]) for row in rows if "_step" in row]
        self.run = wandb.init(project=os.environ.get("WANDB_PROJECT", "rlvr"), name=run_name,
                              id=self.run_id, resume="allow", dir=str(run_dir), config=config,
                              settings=wandb.Settings(console="off", silent=True))
        # a step row W&B holds is complete: the next step's line is what committed it
        self.first_new = max([int(getattr(self.run, "starting_step", 0) or 0)] + [s + 1 for s in held])

    def log(self, step: int, values: dict[str, float]) -> None:
        if step >= self.first_new:
            self.run.log(values, step=step)

    def event(self, step: int, name: str, message: str) -> None:
        if step >= self.first_new:
            self.run.alert(title=f"{name} (step {step})", text=message, level="WARN")

    def table(self, step: int, name: str, rows: Sequence[dict[str, Any]]) -> None:
        if step >= self.first_new and rows:
            keys = list(rows[0])
            data = [[json.dumps(r[c]) if isinstance(r[c], (list, dict)) else r[c] for c in keys]
                    for r in rows]
            self.run.log({name: wandb.Table(columns=list[str | int](keys), data=data)}, step=step)

    def close(self) -> None:
        self.run.finish()


def history(run_dir: Path, run_id: str) -> list[dict[str, Any]]:
    """The history rows of `run_id` in the offline files under `run_dir/wandb`, oldest first."""
    from wandb.proto import wandb_internal_pb2 as pb

    rows = []
    pattern = Path(run_dir) / "wandb" / f"offline-run-*-{run_id}" / f"run-{run_id}.wandb"
    for path in sorted(glob.glob(str(pattern))):
        for data in _records(Path(path).read_bytes()):
            record = pb.Record()  # type: ignore[attr-defined]
            record.ParseFromString(data)
            if record.WhichOneof("record_type") == "history":
                rows.append({item.key or "/".join(item.nested_key): json.loads(item.value_json)
                             for item in record.history.item})
    return rows


def _records(data: bytes) -> Iterator[bytes]:
    """The records of a W&B transaction log (LevelDB log framing after a 7-byte file header)."""
    pos, pending = _HEADER, b""
    while pos + 7 <= len(data):
        left = _BLOCK - pos % _BLOCK
        if left < 7:                     # a block's tail too short for a header is padding
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if kind == 0:                    # zero-filled rest of a block (or of an unfinished file)
            pos += left
            continue
        chunk, pos = data[pos + 7:pos + 7 + length], pos + 7 + length
        if kind == 1:
            yield chunk
        elif kind == 2:
            pending = chunk
        elif kind == 3:
            pending += chunk
        elif kind == 4:
            yield pending + chunk
