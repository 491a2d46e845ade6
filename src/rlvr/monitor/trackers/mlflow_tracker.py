"""MLflow (the `mlflow` extra; `mlflow-skinny` is enough): one MLflow run per rlvr run.

Tracking URI from MLFLOW_TRACKING_URI, else a file store in `RUN_DIR/mlruns` (MLflow 3 keeps that
store only behind MLFLOW_ALLOW_FILE_STORE, which this default sets for the process); experiment from
MLFLOW_EXPERIMENT_NAME (default "rlvr"). The config goes in as parameters (dotted keys), each
metrics line as a batch of metrics at its step (names with characters MLflow refuses get `_`
instead, see `metric_name`), alarms as tags `alarm.<step>.<name>`, tables as JSON artifacts. On
resume each metric's logged history is read once and steps it already holds are skipped.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any, Sequence

from mlflow.entities import Metric, Param
from mlflow.tracking import MlflowClient

from rlvr.monitor.trackers import flat

_BATCH = 100   # MLflow's most parameters per log_batch call


def metric_name(key: str) -> str:
    return re.sub(r"[^\w./\- :]", "_", key)


def open_tracker(run_dir: Path, run_name: str, config: dict[str, Any], run_id: str | None):
    return MlflowTracker(run_dir, run_name, config, run_id)


class MlflowTracker:
    def __init__(self, run_dir: Path, run_name: str, config: dict[str, Any], run_id: str | None):
        uri = os.environ.get("MLFLOW_TRACKING_URI")
        if not uri:   # MLflow 3 refuses its file store unless asked: this default asks
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
            uri = (Path(run_dir) / "mlruns").resolve().as_uri()
        self.client = MlflowClient(tracking_uri=uri)
        self.held: dict[str, int] = {}
        if run_id is None:
            name = os.environ.get("MLFLOW_EXPERIMENT_NAME", "rlvr")
            exp = self.client.get_experiment_by_name(name)
            exp_id = exp.experiment_id if exp is not None else self.client.create_experiment(name)
            self.run_id = self.client.create_run(exp_id, run_name=run_name).info.run_id
            params = [Param(k, v[:500]) for k, v in flat(config).items()]
            for i in range(0, len(params), _BATCH):
                self.client.log_batch(self.run_id, params=params[i:i + _BATCH])
        else:
            self.run_id = run_id
            self.client.update_run(run_id, status="RUNNING")
            for key in self.client.get_run(run_id).data.metrics:
                self.held[key] = max(m.step for m in self.client.get_metric_history(run_id, key))

    def log(self, step: int, values: dict[str, float]) -> None:
        now = int(time.time() * 1000)
        metrics = [Metric(metric_name(k), v, now, step) for k, v in values.items()
                   if step > self.held.get(metric_name(k), -1)]
        for i in range(0, len(metrics), 1000):
            self.client.log_batch(self.run_id, metrics=metrics[i:i + 1000])

    def event(self, step: int, name: str, message: str) -> None:
        self.client.set_tag(self.run_id, f"alarm.{step}.{metric_name(name)}", message[:5000])

    def table(self, step: int, name: str, rows: Sequence[dict[str, Any]]) -> None:
        if rows:
            self.client.log_dict(self.run_id, {"step": step, "rows": list(rows)},
                                 f"{name}/step_{step:06d}.json")

    def close(self) -> None:
        self.client.set_terminated(self.run_id)
