"""`DRY=1 bash bench/gpu_check.sh` runs every phase of the one-shot GPU check on the CPU (CUDA
hidden, tiny shapes): each phase writes its own file under $OUT ending in its status line, the
micro-checks, the memory probe and the rlvr/TRL step pair print their JSON results, and
summary.json gathers them; at most 8 result files, boxes summing to at most 360 s, in at most
120 s of CPU. Also: the GPU tests point at files that exist (the quickstart config moved into
the package once, and two of tests/gpu's tests failed on the path before touching a GPU)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PHASES = ("env", "micro", "memory", "pytest", "trl")
MICRO_CHECKS = {"graph_decode", "thread_capture", "decode_speed", "logprob_parity", "update_speed"}


def _json_lines(path: Path) -> list[dict]:
    out = []
    for line in path.read_text().splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            out.append(value)
    return out


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    pytest.importorskip("trl")
    out = tmp_path_factory.mktemp("gpu_check")
    env = {**os.environ, "DRY": "1", "OUT": str(out), "PY": sys.executable, "OMP_NUM_THREADS": "1"}
    env.pop("PYTHONPATH", None)          # the script puts this checkout's src first itself
    t0 = time.monotonic()
    done = subprocess.run(["bash", str(ROOT / "bench" / "gpu_check.sh")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    done.seconds = time.monotonic() - t0
    return out, done


def test_every_phase_writes_its_file_and_passes(dry_run):
    out, done = dry_run
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert done.seconds <= 120, done.seconds
    assert len(list(out.iterdir())) <= 8
    assert sum(_json_lines(out / f"{name}.log")[-1]["box_s"] for name in PHASES) <= 360
    for name in PHASES:
        status = _json_lines(out / f"{name}.log")[-1]
        assert status["phase"] == name and status["rc"] == 0 and status["dry"] is True, status
        assert not status["timed_out"] and status["s"] <= status["box_s"]
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary) == set(PHASES) and all(summary[p]["status"]["rc"] == 0 for p in PHASES)


def test_each_phase_holds_its_results(dry_run):
    out, _ = dry_run
    env = _json_lines(out / "env.log")
    assert any("torch" in x and x.get("gpus") == [] for x in env)          # CUDA hidden
    micro = {x["check"]: x for x in _json_lines(out / "micro.log") if "check" in x}
    assert MICRO_CHECKS <= set(micro) and all(micro[c]["ok"] for c in MICRO_CHECKS), micro
    assert micro["device"]["device"] == "cpu" and micro["decode_speed"]["replay_1"]["tok_s"] > 0
    trl = [x for x in _json_lines(out / "trl.log") if x.get("phase") == "trl" and "ratio" in x]
    assert trl and trl[0]["rlvr_decode_tok_s"] > 0 and trl[0]["trl_error"] is None
    pytest_log = (out / "pytest.log").read_text()
    assert "skipped" in pytest_log                                          # collected, no GPU
    assert pytest_log.index("test_gpu_paths.py") < pytest_log.index("test_gpu.py::")   # paths first
    memory = _json_lines(out / "memory.log")
    probes = [x for x in memory if x.get("check") == "memory"]
    assert [x["mode"] for x in probes] == ["one", "ddp"] and all(x["ok"] for x in probes), probes
    assert all(x["budget_tokens"] >= 1024 and x["predicted_gb"] > 0 for x in probes)
    dist = [x for x in memory if x.get("phase") == "dist"]
    assert [x["mode"] for x in dist] == ["fsdp2"] and dist[0]["ok"], dist


def test_gpu_tests_point_at_files_that_exist():
    spec = importlib.util.spec_from_file_location("gpu_test_module", ROOT / "tests" / "gpu" / "test_gpu.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert Path(module.QUICKSTART).is_file(), module.QUICKSTART


def test_a_phase_past_its_box_is_stopped_and_says_so(tmp_path):
    env = {**os.environ, "DRY": "1", "OUT": str(tmp_path), "PY": sys.executable, "PHASES": "micro",
           "BOX_micro": "1"}
    done = subprocess.run(["bash", str(ROOT / "bench" / "gpu_check.sh")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    status = _json_lines(tmp_path / "micro.log")[-1]
    assert status["phase"] == "micro" and status["timed_out"] is True and status["rc"] == 124, status
    assert json.loads((tmp_path / "summary.json").read_text())["micro"]["status"] == status
