"""W&B (offline), MLflow (file store) and trackio (local SQLite store) fed by a real `rlvr train`,
killed with SIGKILL and resumed: the values read back from each tracker's own files equal
`metrics.jsonl`'s (pass@k from `eval.k` included), every step is held once, the resumed run continued
the same tracker runs, and completions.parquet holds each logged step's completions once."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

pytest.importorskip("wandb")
pytest.importorskip("mlflow")
pytest.importorskip("trackio")

NON_DETERMINISTIC = ("time", "timing/", "tokens_per_s")


def _config(tmp_path: Path, run_dir: Path) -> Path:
    cfg = tmp_path / "trackers.yaml"
    cfg.write_text(
        "seed: 1\n"
        f"run: {{dir: {run_dir}, save_every: 2, eval_every: 3, progress: false, threads: 1,"
        " report: false, trackers: [tensorboard, wandb, mlflow, trackio],"
        " log_completions: 2}\n"
        "data: {task: arithmetic, difficulty: 1, heldout_size: 6}\n"
        "rollout: {max_new_tokens: 12}\n"
        "grpo: {steps: 7, group_size: 3, prompts_per_step: 2}\n"
        "eval: {k: [1, 2]}\n")
    return cfg


def _metric_lines(run_dir: Path) -> dict[int, dict[str, float]]:
    """step → the deterministic numeric values of every line at that step (step and eval lines)."""
    out: dict[int, dict[str, float]] = defaultdict(dict)
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if "event" in rec or "step" not in rec:
            continue
        out[rec["step"]].update({k: v for k, v in rec.items()
                                 if k != "step" and not k.startswith(NON_DETERMINISTIC)
                                 and isinstance(v, (int, float)) and not isinstance(v, bool)})
    return dict(out)


def _kill_after_rows(cmd, env, run_dir: Path, rows: int) -> None:
    from rlvr.monitor.completions import row_count

    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 300
    path = run_dir / "completions.parquet"
    while proc.poll() is None and time.time() < deadline:
        if path.exists() and row_count(path) >= rows:
            os.kill(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.01)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()[-3000:]


def test_trackers_hold_the_metrics_once_across_a_kill_and_resume(tmp_path):
    from mlflow.tracking import MlflowClient
    os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")   # to read the run's file store back

    from rlvr.monitor import completions
    from rlvr.monitor.trackers.mlflow_tracker import metric_name
    from rlvr.monitor.trackers.trackio_tracker import metric_name as trackio_name
    from rlvr.monitor.trackers.wandb_tracker import history

    run_dir = tmp_path / "run"
    env = dict(os.environ, WANDB_MODE="offline", WANDB_SILENT="true", OMP_NUM_THREADS="1")
    env.pop("MLFLOW_TRACKING_URI", None)
    env.pop("TRACKIO_DIR", None)
    cmd = [sys.executable, "-m", "rlvr.cli", "train", str(_config(tmp_path, run_dir))]
    # killed once step 4's completions are written: after the checkpoint at 4 steps done, which
    # holds 12 rows (steps 0 and 2), so the resumed run must cut step 4's rows and write them again
    _kill_after_rows(cmd, env, run_dir, 18)
    ids = json.loads((run_dir / "trackers.json").read_text())
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads((run_dir / "trackers.json").read_text()) == ids   # the same tracker runs
    expected = _metric_lines(run_dir)
    assert sorted(expected) == list(range(8)) and "eval/accuracy" in expected[3]
    for step in (3, 6, 7):   # eval.k runs inside the training run, at every evaluation
        ev = expected[step]
        assert 0 <= ev["eval/pass@1"] <= ev["eval/pass@2"] <= 1 and "eval/maj@2" in ev, ev
    rows = completions.read(run_dir / "completions.parquet")   # 2 prompts x 3 completions a step
    assert [r["step"] for r in rows] == [0] * 6 + [2] * 6 + [4] * 6 + [6] * 6
    assert [(r["group"], r["sample"]) for r in rows[:6]] == [(p, g) for p in range(2) for g in range(3)]

    # W&B: two offline sessions of the one run id, one row per step between them
    sessions = sorted((run_dir / "wandb").glob("offline-run-*"))
    assert len(sessions) == 2 and all(s.name.endswith(ids["wandb"]) for s in sessions)
    history_rows = history(run_dir, ids["wandb"])
    steps = [r["_step"] for r in history_rows]
    assert sorted(steps) == list(range(8)), steps               # each step once, none missing
    tables = [(r["_step"], r["completions/nrows"]) for r in history_rows if "completions/nrows" in r]
    assert tables == [(0, 6), (2, 6), (4, 6), (6, 6)]             # the completions tables
    for row in history_rows:
        want = expected[row["_step"]]
        assert {k: row[k] for k in want} == pytest.approx(want), row["_step"]

    # MLflow: one run in the file store; each metric's history has each step once
    client = MlflowClient(tracking_uri=(run_dir / "mlruns").resolve().as_uri())
    exp = client.get_experiment_by_name("rlvr")
    assert [r.info.run_id for r in client.search_runs([exp.experiment_id])] == [ids["mlflow"]]
    run = client.get_run(ids["mlflow"])
    assert run.data.params["grpo.steps"] == "7" and run.info.status == "FINISHED"
    tables = sorted(a.path for a in client.list_artifacts(ids["mlflow"], "completions"))
    assert tables == [f"completions/step_{s:06d}.json" for s in (0, 2, 4, 6)]
    got: dict[int, dict[str, float]] = defaultdict(dict)
    for key in run.data.metrics:
        points = client.get_metric_history(ids["mlflow"], key)
        assert len({p.step for p in points}) == len(points), key   # no step twice
        for p in points:
            got[p.step][key] = p.value
    for step, want in expected.items():
        assert {metric_name(k): got[step][metric_name(k)] for k in want} == pytest.approx(
            {metric_name(k): v for k, v in want.items()}), step

    # trackio: one run in RUN_DIR/trackio/rlvr.db, each metric at each step once, alarms none here
    assert ids["trackio"] == run_dir.name
    db = sqlite3.connect(run_dir / "trackio" / "rlvr.db")
    assert [r for (r,) in db.execute("SELECT run_name FROM configs")] == [ids["trackio"]]
    (config,) = db.execute("SELECT config FROM configs").fetchone()
    assert json.loads(config)["grpo"]["steps"] == 7
    held: dict[int, dict[str, float]] = defaultdict(dict)
    tables = []
    for step, metrics in db.execute("SELECT step, metrics FROM metrics WHERE run_name = ?",
                                    (ids["trackio"],)):
        for key, value in json.loads(metrics).items():
            assert key not in held[step], (step, key)                  # no step twice
            held[step][key] = value
        if "completions" in held[step] and step not in [t for t, _ in tables]:
            tables.append((step, len(held[step]["completions"]["_value"])))
    assert sorted(tables) == [(0, 6), (2, 6), (4, 6), (6, 6)]          # the completions tables
    assert sorted(held) == list(range(8))
    for step, want in expected.items():
        got_t = {k: held[step][trackio_name(k)] for k in want}
        assert got_t == pytest.approx(want), step


WANDB_SESSION = """
import os, signal, sys
from pathlib import Path
from rlvr.monitor.trackers.wandb_tracker import WandbTracker
run_id = sys.argv[2] or None
t = WandbTracker(Path(sys.argv[1]), "x", {}, run_id)
print(t.run_id, t.first_new, flush=True)
for step in range(80):   # 80 steps x 80 metrics: W&B flushes whole 32 KiB blocks of them
    t.log(step, {f"m/{i}": step + i / 100 for i in range(80)})
if run_id is None:
    os.kill(os.getpid(), signal.SIGKILL)   # the unflushed tail is lost
t.close()
"""


def test_wandb_skips_the_steps_its_killed_session_flushed(tmp_path):
    from rlvr.monitor.trackers.wandb_tracker import history

    env = dict(os.environ, WANDB_MODE="offline", WANDB_SILENT="true")
    first = subprocess.run([sys.executable, "-c", WANDB_SESSION, str(tmp_path), ""], env=env,
                           capture_output=True, text=True, timeout=120)
    assert first.returncode == -signal.SIGKILL, first.stderr[-2000:]
    run_id = first.stdout.split()[0]
    flushed = sorted(r["_step"] for r in history(tmp_path, run_id))
    assert 0 < len(flushed) < 80 and flushed == list(range(len(flushed)))
    second = subprocess.run([sys.executable, "-c", WANDB_SESSION, str(tmp_path), run_id], env=env,
                            capture_output=True, text=True, timeout=120)
    assert second.returncode == 0, second.stderr[-2000:]
    assert second.stdout.split() == [run_id, str(len(flushed))]   # resumes after what W&B holds
    rows = history(tmp_path, run_id)
    assert sorted(r["_step"] for r in rows) == list(range(80))     # every step once
    assert all(r["m/3"] == pytest.approx(r["_step"] + 0.03) for r in rows)


WANDB_ALARM = """
import sys
from pathlib import Path
from rlvr.monitor.trackers import open_trackers
t = open_trackers(["wandb"], Path(sys.argv[1]), "x", {})
t.write({"step": 0, "reward/mean": 0.5})
t.write({"step": 0, "event": "alarm", "name": "entropy_collapse", "message": "lower the lr"})
t.write({"step": 1, "reward/mean": 0.7})
t.close()
"""


def test_wandb_gets_alarms_as_alerts(tmp_path):
    from wandb.proto import wandb_internal_pb2 as pb

    from rlvr.monitor.trackers.wandb_tracker import _records

    env = dict(os.environ, WANDB_MODE="offline", WANDB_SILENT="true")
    done = subprocess.run([sys.executable, "-c", WANDB_ALARM, str(tmp_path)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    (path,) = tmp_path.glob("wandb/offline-run-*/run-*.wandb")
    alerts = []
    for data in _records(path.read_bytes()):
        record = pb.Record()
        record.ParseFromString(data)
        if record.WhichOneof("record_type") == "alert":
            alerts.append((record.alert.title, record.alert.text))
    assert alerts == [("entropy_collapse (step 0)", "lower the lr")]


TRACKIO_SESSION = """
import os, signal, sys, time
from pathlib import Path
from rlvr.monitor.trackers import open_trackers
t = open_trackers(["trackio"], Path(sys.argv[1]), "x", {"seed": 1})
print(t.trackers["trackio"].run_id, flush=True)
kill = sys.argv[2] == "kill"
for step in range(10 if kill else 12):
    t.write({"step": step, "reward/mean": step / 10, "time": 0.5})
    if step == 2:
        t.write({"step": 2, "event": "alarm", "name": "entropy_collapse", "message": "lower the lr"})
if kill:
    time.sleep(1.5)                        # trackio writes its queue every 0.5 s
    t.write({"step": 10, "reward/mean": 1.0})
    os.kill(os.getpid(), signal.SIGKILL)   # step 10 was still queued: lost
t.close()
"""


def test_trackio_resumes_its_run_and_holds_each_step_and_alarm_once(tmp_path):
    env = dict(os.environ)
    env.pop("TRACKIO_DIR", None)
    first = subprocess.run([sys.executable, "-c", TRACKIO_SESSION, str(tmp_path), "kill"], env=env,
                           capture_output=True, text=True, timeout=120)
    assert first.returncode == -signal.SIGKILL, first.stderr[-2000:]
    db = tmp_path / "trackio" / "rlvr.db"
    steps = [s for (s,) in sqlite3.connect(db).execute("SELECT step FROM metrics ORDER BY step")]
    assert steps == list(range(10))                                    # step 10 died in the queue
    second = subprocess.run([sys.executable, "-c", TRACKIO_SESSION, str(tmp_path), "resume"], env=env,
                            capture_output=True, text=True, timeout=120)
    assert second.returncode == 0, second.stderr[-2000:]
    assert second.stdout.split() == first.stdout.split() == ["x"]     # the same trackio run
    assert "Reserved keys" not in second.stderr and second.stdout.strip() == "x"
    conn = sqlite3.connect(db)
    rows = [(s, json.loads(m)) for s, m in conn.execute("SELECT step, metrics FROM metrics ORDER BY step")]
    assert [s for s, _ in rows] == list(range(12))                     # every step once
    assert all(m == {"reward/mean": pytest.approx(s / 10), "__time": 0.5} for s, m in rows)
    alerts = list(conn.execute("SELECT run_name, step, title, text, level FROM alerts"))
    assert alerts == [("x", 2, "entropy_collapse", "lower the lr", "warn")]
    assert list(conn.execute("SELECT run_name FROM configs")) == [("x",)]


TRACKIO_TWO_STORES = """
import sys
from pathlib import Path
from rlvr.errors import UserError
from rlvr.monitor.trackers import open_trackers
open_trackers(["trackio"], Path(sys.argv[1]), "a", {}).close()
try:
    open_trackers(["trackio"], Path(sys.argv[2]), "b", {})
except UserError as exc:
    print(exc)
"""


def test_trackio_refuses_a_second_store_in_one_process(tmp_path):
    """trackio fixes its directory at import: a second run dir in the process is an error, not a
    silent write into the first run's store."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    env = dict(os.environ)
    env.pop("TRACKIO_DIR", None)
    cmd = [sys.executable, "-c", TRACKIO_TWO_STORES, str(tmp_path / "a"), str(tmp_path / "b")]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("run.trackers: trackio could not start a run: RuntimeError: trackio was "
                                  "imported earlier"), done.stdout
    assert not (tmp_path / "b" / "trackio").exists() and not (tmp_path / "b" / "trackers.json").exists()
