"""trackio (the `trackio` extra): one trackio run per rlvr run, in a local store, resumed by name.

The store is `RUN_DIR/trackio` (trackio's SQLite database `rlvr.db` there) unless TRACKIO_DIR is set;
trackio reads that variable once, at import, so this module sets it before importing trackio and
refuses to open when an earlier import in the process fixed another directory. Only the local
store is meant (resume reads it; trackio's TRACKIO_SPACE_ID / TRACKIO_SERVER_URL are not supported):
no dashboard is launched (`embed=False`), no CPU/GPU monitor threads run. Project
"rlvr"; the run name is the rlvr run's (a suffix is added when the store already holds that name),
and that name is what `trackers.json` keeps, since trackio resumes runs by name.

Each metrics line is `run.log(values, step=step)` (one database row per line), the config is the
run's config; trackio stores the keys it reserves (`time`, `step`, ...) as `__<key>` (see
`metric_name`; its warning about that renaming is silenced). Alarms are trackio alerts (level WARN, at the
alarm's step; its title is the alarm name, its text the message), tables are `trackio.Table`s. On
resume the store is read once: each metric's last step and the alerts it holds are skipped. trackio
writes its queue to the database every half second, so a kill -9 loses at most that tail; the
metrics log replays its lines on resume and the lost steps are written again, the held ones never.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sqlite3
import uuid
import warnings
from pathlib import Path
from typing import Any, Sequence

PROJECT = "rlvr"
RESERVED = ("project", "run", "timestamp", "step", "time", "metrics")


def metric_name(key: str) -> str:
    """The name trackio stores a metric under."""
    return f"__{key}" if key in RESERVED or key.startswith("__") else key


def open_tracker(run_dir: Path, run_name: str, config: dict[str, Any], run_id: str | None):
    return TrackioTracker(run_dir, run_name, config, run_id)


def store_dir(run_dir: Path) -> Path:
    return Path(os.environ.get("TRACKIO_DIR") or Path(run_dir).resolve() / "trackio")


def _import_trackio(store: Path) -> Any:
    before = os.environ.get("TRACKIO_DIR")
    os.environ["TRACKIO_DIR"] = str(store)
    try:
        import trackio
        from trackio import utils
    finally:   # restored: the variable is the user's choice, not what an earlier run dir set
        if before is None:
            del os.environ["TRACKIO_DIR"]
        else:
            os.environ["TRACKIO_DIR"] = before

    if Path(utils.TRACKIO_DIR).resolve() != store.resolve():
        raise RuntimeError(f"trackio was imported earlier with its store at {utils.TRACKIO_DIR}, "
                           f"not {store}: trackio fixes its directory at import")
    warnings.filterwarnings("ignore", message="Reserved keys renamed")   # expected: see metric_name
    return trackio


class TrackioTracker:
    def __init__(self, run_dir: Path, run_name: str, config: dict[str, Any], run_id: str | None):
        store = store_dir(run_dir)
        trackio = self.trackio = _import_trackio(store)
        self.db = store / f"{PROJECT}.db"
        names = set(_query(self.db, "SELECT run_name FROM configs", ()))
        if run_id is None:
            run_id = run_name if run_name not in names else f"{run_name}-{uuid.uuid4().hex[:6]}"
        self.run_id = run_id
        self.held, self.alerts = held(self.db, run_id)
        with contextlib.redirect_stdout(io.StringIO()):   # trackio prints its banner and alerts
            self.run = trackio.init(project=PROJECT, name=run_id, config=config, embed=False,
                                    resume="must" if run_id in names else "never",
                                    auto_log_cpu=False, auto_log_gpu=False)

    def log(self, step: int, values: dict[str, float]) -> None:
        new = {k: v for k, v in values.items() if step > self.held.get(metric_name(k), -1)}
        if new:
            self.run.log(new, step=step)

    def event(self, step: int, name: str, message: str) -> None:
        if (step, name) not in self.alerts:
            with contextlib.redirect_stdout(io.StringIO()):
                self.run.alert(title=name, text=message, step=step)

    def table(self, step: int, name: str, rows: Sequence[dict[str, Any]]) -> None:
        if rows and step > self.held.get(name, -1):
            data = [{k: json.dumps(v) if isinstance(v, (list, dict)) else v for k, v in r.items()}
                    for r in rows]
            self.run.log({name: self.trackio.Table(data=data)}, step=step)

    def close(self) -> None:
        with contextlib.redirect_stdout(io.StringIO()):
            self.run.finish()
        current = self.trackio.context_vars.current_run
        if current.get() is self.run:   # else trackio's exit hook finishes it again, loudly
            current.set(None)


def _query(db: Path, sql: str, args: tuple) -> list[Any]:
    if not db.exists():
        return []
    with contextlib.closing(sqlite3.connect(db)) as conn:
        try:
            return [row[0] if len(row) == 1 else row for row in conn.execute(sql, args)]
        except sqlite3.OperationalError:    # a store without that table yet
            return []


def held(db: Path, run_name: str) -> tuple[dict[str, int], set[tuple[int, str]]]:
    """What the store holds of `run_name`: each metric's last step, and its alerts (step, title)."""
    last: dict[str, int] = {}
    for step, metrics in _query(db, "SELECT step, metrics FROM metrics WHERE run_name = ?", (run_name,)):
        for key in json.loads(metrics):
            last[key] = max(last.get(key, -1), int(step))
    alerts = {(int(s), str(t)) for s, t in
              _query(db, "SELECT step, title FROM alerts WHERE run_name = ?", (run_name,))}
    return last, alerts
