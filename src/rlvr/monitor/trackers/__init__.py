"""Experiment trackers fed from the metrics log: W&B, MLflow, trackio (optional extras), one module each.

`open_trackers` opens the trackers named in `run.trackers` (TensorBoard is written by
`rlvr.monitor.log.MetricsLog` itself) and returns a `Trackers` fan-out that `MetricsLog` hands
every line it writes to `metrics.jsonl`: step and eval lines become metrics at their `step`, under
the same names (MLflow replaces characters it refuses by `_`, trackio prefixes the keys it
reserves with `__`); alarm events become the tracker's events (W&B and trackio alerts, MLflow
tags); `table` sends rows (the completions) to trackers that take tables. A tracker's package is
imported only in its own module, and only when it is named.

Resume: the tracker run ids are kept in `RUN_DIR/trackers.json`, written when the trackers open,
so a resumed run (same run dir) continues the same tracker runs. Lines after the checkpoint are
written again on resume; each tracker skips the steps it already holds (W&B: its resumed step,
or in offline mode the steps in its earlier offline files; MLflow, trackio: each metric's last
step), so no step is logged twice. Guaranteed: a run that names no tracker imports no tracker package.
"""

from __future__ import annotations

import importlib
import json
import math
from pathlib import Path
from typing import Any, Protocol, Sequence

from rlvr.errors import UserError
from rlvr.monitor.atomic import write_text_atomic

IDS_FILE = "trackers.json"
_MODULES = {"wandb": "rlvr.monitor.trackers.wandb_tracker", "mlflow": "rlvr.monitor.trackers.mlflow_tracker",
            "trackio": "rlvr.monitor.trackers.trackio_tracker"}


class Tracker(Protocol):
    run_id: str

    def log(self, step: int, values: dict[str, float]) -> None: ...

    def event(self, step: int, name: str, message: str) -> None: ...

    def table(self, step: int, name: str, rows: Sequence[dict[str, Any]]) -> None: ...

    def close(self) -> None: ...


class Trackers:
    """Every open tracker, fed one metrics line (or table) at a time."""

    def __init__(self, trackers: dict[str, Tracker]):
        self.trackers = trackers

    def write(self, record: dict[str, Any]) -> None:
        if "step" not in record:
            return
        step = int(record["step"])
        if record.get("event") == "alarm":
            for t in self.trackers.values():
                t.event(step, str(record.get("name")), str(record.get("message", "")))
            return
        if "event" in record:
            return
        values = {k: float(v) for k, v in record.items() if k != "step" and _number(v)}
        if values:
            for t in self.trackers.values():
                t.log(step, values)

    def table(self, step: int, name: str, rows: Sequence[dict[str, Any]]) -> None:
        for t in self.trackers.values():
            t.table(step, name, rows)

    def close(self) -> None:
        for t in self.trackers.values():
            t.close()


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def open_trackers(names: Sequence[str], run_dir: Path, run_name: str, config: dict[str, Any],
                  fresh: bool = False) -> Trackers:
    """The named trackers (TensorBoard aside), continuing the runs recorded in the run dir unless
    `fresh`; the run ids are saved before anything is logged."""
    ids_path = Path(run_dir) / IDS_FILE
    ids = {} if fresh or not ids_path.exists() else _read_ids(ids_path)
    opened: dict[str, Tracker] = {}
    for name in names:
        if name in _MODULES:
            module = importlib.import_module(_MODULES[name])
            try:
                opened[name] = module.open_tracker(Path(run_dir), run_name, config, ids.get(name))
            except Exception as exc:  # noqa: BLE001 - a login, a server, a store: say which and stop
                for t in opened.values():
                    t.close()
                raise UserError(f"run.trackers: {name} could not start a run: "
                                f"{type(exc).__name__}: {exc}") from None
    if opened:
        ids.update({name: t.run_id for name, t in opened.items()})
        write_text_atomic(ids_path, json.dumps(ids, indent=1) + "\n")
    return Trackers(opened)


def _read_ids(path: Path) -> dict[str, str]:
    """The tracker run ids a resume continues; a damaged file stops the run, naming it."""
    try:
        ids = json.loads(path.read_text())
    except (ValueError, OSError) as exc:
        raise UserError(f"{path}: cannot read the tracker run ids ({exc}); restore it, or delete it "
                        "to start new tracker runs") from None
    if not isinstance(ids, dict):
        raise UserError(f"{path}: expected a JSON object of tracker run ids, got {type(ids).__name__}")
    return ids


def flat(config: dict[str, Any], prefix: str = "") -> dict[str, str]:
    """A nested config as dotted keys → strings (for trackers whose parameters are flat)."""
    out: dict[str, str] = {}
    for key, value in config.items():
        if isinstance(value, dict) and value:
            out.update(flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = json.dumps(value) if not isinstance(value, str) else value
    return out
