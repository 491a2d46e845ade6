"""A reward service term against the shipped server (`python -m rlvr.verifiers.serve`) on loopback:
batching, the bearer token, size limits, a killed server (the reward_crash path), and a run whose
server is killed mid-run under run.strict_rewards, resumed after a restart, equal to one that never
lost its server."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlvr.types import Problem
from rlvr.verifiers.reward_funcs import RewardFunctionsVerifier

NON_DETERMINISTIC = ("time", "timing/", "tokens_per_s")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(*args: str, port: int = 0, env: dict | None = None) -> tuple[subprocess.Popen, str]:
    """Start the shipped server; (process, its URL) once it listens."""
    proc = subprocess.Popen([sys.executable, "-m", "rlvr.verifiers.serve", *args, "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})
    line = proc.stdout.readline()
    assert line.startswith("listening on "), (line, proc.stderr.read() if proc.poll() is not None else "")
    return proc, line.split()[-1]


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


def _problems(n: int) -> list[Problem]:
    return [Problem(f"p{i}", f"{i}+1=", str(i + 1), "reward_funcs") for i in range(n)]


def test_batched_requests_score_like_the_verifier_and_a_killed_server_is_a_reward_crash():
    proc, url = serve("arithmetic")
    v = RewardFunctionsVerifier(terms=[{"service": url, "name": "remote", "batch_size": 3,
                                        "concurrency": 2, "retries": 1, "timeout_s": 5}])
    try:
        responses = [f">{i + 1}" if i % 2 else f">{i}" for i in range(7)]
        scores = v.score_batch(responses, _problems(7))
        assert [s.reward for s in scores] == [float(i % 2) for i in range(7)]
        assert [s.correct for s in scores] == [bool(i % 2) for i in range(7)]   # the server's verdict
        assert scores[1].details["terms"] == {"remote": 1.0}
        stop(proc)
        t0 = time.perf_counter()
        scores = v.score_batch(responses, _problems(7))
        assert time.perf_counter() - t0 < 5                       # one retry, 0.5 s apart
        assert all(s.reward == 0.0 and s.flags == ("crash",) for s in scores)
        assert "Connection" in scores[0].details["term_errors"]["remote"]["error"]
    finally:
        stop(proc)
        v.close()


def test_bearer_token_size_limit_and_loopback_rule(monkeypatch):
    proc, url = serve("arithmetic", "--token-env", "SERVE_TOKEN", "--max-mb", "0.001",
                      env={"SERVE_TOKEN": "s3cret"})
    try:
        with pytest.raises(ValueError, match="HTTP 401"):
            RewardFunctionsVerifier(terms=[{"service": url, "token_env": "NO_SUCH_VAR"}])
        monkeypatch.setenv("MY_TOKEN", "s3cret")
        v = RewardFunctionsVerifier(terms=[{"service": url, "token_env": "MY_TOKEN", "retries": 0}])
        assert v.score_batch([">2"], _problems(2)[1:])[0].reward == 1.0
        big = v.score_batch(["x" * 2000], _problems(1))[0]        # over --max-mb: 413, not retried
        assert big.flags == ("crash",) and "HTTP 413" in big.details["error"]
        host, port = url.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=5)
        conn.request("POST", "/score", body=b"\x80\x04pickle", headers={"Authorization": "Bearer s3cret"})
        assert conn.getresponse().status == 400                   # JSON only
        v.close()
    finally:
        stop(proc)
    out = subprocess.run([sys.executable, "-m", "rlvr.verifiers.serve", "arithmetic", "--host", "0.0.0.0"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "not loopback" in out.stderr


def _config(tmp_path: Path, run_dir: Path, model: Path, url: str) -> Path:
    data = tmp_path / "train.jsonl"
    with data.open("w") as f:
        for a in range(100, 164):
            f.write(json.dumps({"prompt": f"{a}+{a + 11}=", "reference": str(2 * a + 11)}) + "\n")
    cfg = tmp_path / f"{run_dir.name}.yaml"
    cfg.write_text(
        "seed: 3\n"
        f"run: {{dir: {run_dir}, save_every: 1, eval_every: 0, keep_last: 2, progress: false,"
        " threads: 1, report: false, strict_rewards: true}\n"
        f"model: {{path: {model}}}\n"
        f"data: {{task: '', train_path: {data}, heldout_size: 0,"
        f" reward_funcs: [{{service: '{url}', name: remote, retries: 1, timeout_s: 5}}]}}\n"
        "rollout: {max_new_tokens: 40}\n"
        "grpo: {steps: 6, group_size: 4, prompts_per_step: 4, lr: 5.0e-5}\n")
    return cfg


def _metric_lines(run_dir: Path) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if not k.startswith(NON_DETERMINISTIC)}
            for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def _train(cfg: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "rlvr.cli", "train", str(cfg)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_server_killed_mid_run_stops_a_strict_run_and_the_resume_is_exact(tmp_path, cold_start_model):
    port = free_port()
    proc, url = serve("arithmetic", port=port)
    try:
        whole = tmp_path / "whole"
        assert _train(_config(tmp_path, whole, cold_start_model, url)).wait(timeout=600) == 0
        cut = tmp_path / "cut"
        run = _train(_config(tmp_path, cut, cold_start_model, url))
        while run.poll() is None and not (cut / "metrics.jsonl").exists():
            time.sleep(0.05)
        while run.poll() is None and (cut / "metrics.jsonl").read_text().count('"reward/mean"') < 2:
            time.sleep(0.01)
        stop(proc)                                    # the reward server dies mid-run
        log, code = run.communicate(timeout=600)[0], run.returncode
        assert code == 2 and "reward_crash" in log and "remote" in log, log[-2000:]
        events = [r for r in _metric_lines(cut) if r.get("event") == "reward_crash"]
        assert events and "Connection" in events[0]["error"]
        proc, url = serve("arithmetic", port=port)   # back on the same address: resume
        resumed = _train(_config(tmp_path, cut, cold_start_model, url))
        log = resumed.communicate(timeout=600)[0]
        assert resumed.returncode == 0, log[-2000:]
        assert _metric_lines(cut) == _metric_lines(whole)
        weights = [(d / "final" / "model.safetensors").read_bytes() for d in (whole, cut)]
        assert weights[0] == weights[1]
    finally:
        stop(proc)
