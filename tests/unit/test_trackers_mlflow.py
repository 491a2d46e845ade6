"""The tracker fan-out on a real MLflow file store: metrics lines, alarm events, a failing store."""

import pytest

pytest.importorskip("mlflow")

from rlvr.errors import UserError  # noqa: E402
from rlvr.monitor.trackers import open_trackers  # noqa: E402


def test_lines_and_alarms_reach_mlflow_and_a_bad_store_is_a_user_error(tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    trackers = open_trackers(["tensorboard", "mlflow"], tmp_path, "run-a", {"grpo": {"lr": 1e-5}})
    trackers.write({"step": 3, "reward/mean": 0.25, "rewards/my:fn/mean": 1.0, "flag": True,
                    "bad": float("nan"), "group_pass_rates": [0.5]})
    trackers.write({"step": 3, "event": "alarm", "name": "entropy_collapse", "message": "lower lr"})
    trackers.write({"step": 4, "event": "checkpoint", "path": "x"})       # other events: not logged
    trackers.close()
    run_id = trackers.trackers["mlflow"].run_id
    run = MlflowClient(tracking_uri=(tmp_path / "mlruns").resolve().as_uri()).get_run(run_id)
    assert run.data.metrics == {"reward/mean": 0.25, "rewards/my:fn/mean": 1.0}
    assert run.data.params == {"grpo.lr": "1e-05"} and run.info.run_name == "run-a"
    assert run.data.tags["alarm.3.entropy_collapse"] == "lower lr"

    monkeypatch.setenv("MLFLOW_TRACKING_URI", "nosuchscheme://nowhere")
    with pytest.raises(UserError, match="run.trackers: mlflow could not start"):
        open_trackers(["mlflow"], tmp_path / "other", "run-b", {})
