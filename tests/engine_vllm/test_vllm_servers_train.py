"""Runs of `rlvr train` with `rollout.engine: vllm_server` and 2 real server processes.

- kill -9 of one server mid-run: the run finishes (the server is restarted, given the current
  weights and sent its share again) and every metric line equals that of a run where nothing was
  killed, timings aside (each prompt carries its own seed, and the restarted server batches the
  same requests, so the samples are the same).
- kill -9 of the whole job (the trainer's process group) after its first checkpoint: no server
  outlives it (they run in sessions of their own, so only `--exit-with-parent` ends them) and its
  weight files in shared memory are gone; the relaunch resumes and ends with the final weights
  (bitwise) and metric lines of the run nothing stopped.
- torchrun, 2 ranks, DDP and FSDP2, with 2 servers held by rank 0: the first step's completions are
  the one-process run's, token count, text, reward and advantage of each; every later metric is
  within float noise of it (the update differs only by the gradient's all-reduce).
Every push is checked in the engine (each server's hash of the tensors it loaded against the
trainer's, the servers' policy versions), so a finished run is one where every check passed.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("vllm", reason="vllm is not installed here: tests/engine_vllm runs under .venv-vllm (make venv-vllm)")

SRC = Path(__file__).parent.parent.parent / "src"
STEPS = 6
NON_DETERMINISTIC = ("time", "timing/", "tokens_per_s", "throughput/")


def _env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo", "TOKENIZERS_PARALLELISM": "false",
            "PYTHONPATH": str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _config(tmp: Path, name: str, model: Path | str = "builtin:tiny-llama", run_extra: str = "",
            rollout_extra: str = "", task: str = "arithmetic", grpo_extra: str = "",
            save_every: int = STEPS) -> tuple[Path, Path]:
    run_dir, cfg = tmp / name, tmp / f"{name}.yaml"
    cfg.write_text(
        "seed: 0\n"
        f"run: {{dir: {run_dir}, eval_every: {STEPS}, save_every: {save_every}, progress: false, threads: 1, "
        f"report: false, log_completions: 1{run_extra}}}\n"
        f"model: {{path: '{model}'}}\n"
        f"data: {{task: {task}, difficulty: 3, heldout_size: 16}}\n"
        "rollout: {engine: vllm_server, vllm_servers: 2, max_new_tokens: 40, "
        f"vllm_options: {{kv_cache_memory_bytes: 268435456}}{rollout_extra}}}\n"
        f"grpo: {{steps: {STEPS}, group_size: 4, prompts_per_step: 4, lr: 5.0e-5{grpo_extra}}}\n"
        "agent: {max_turns: 3, max_tokens: 48, turn_tokens: 16}\n")
    return cfg, run_dir


def _start(cmd: list[str]) -> subprocess.Popen:
    return subprocess.Popen(cmd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def _finish(proc: subprocess.Popen, timeout: float = 600) -> str:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(f"timed out:\n{err[-4000:]}")
    assert proc.returncode == 0, out[-2000:] + err[-4000:]
    return err


def _train(cfg: Path, launcher: list[str] | None = None) -> str:
    return _finish(_start((launcher or [sys.executable]) + ["-m", "rlvr.cli", "train", str(cfg)]))


def _metrics(run_dir: Path) -> list[dict]:
    lines = [json.loads(l) for l in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if not k.startswith(NON_DETERMINISTIC)} for r in lines]


def _rows(run_dir: Path) -> list[dict]:
    import pyarrow.parquet as pq

    return pq.read_table(run_dir / "completions.parquet").to_pylist()


def _completions(run_dir: Path, step: int) -> list[tuple]:
    return [(r["group"], r["sample"], r["completion"], r["tokens"], r["reward"], r["advantage"])
            for r in _rows(run_dir) if r["step"] == step]


def _servers_of(pid: int) -> list[int]:
    """The vLLM server processes whose parent is `pid`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmd = (entry / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid and b"rlvr.rollout.vllm.server" in cmd:
            found.append(int(entry.name))
    return found


def _weights_dir(pid: int) -> Path:
    """The engine's shared-memory directory a server loads from (its --model's parent)."""
    cmd = (Path("/proc") / str(pid) / "cmdline").read_bytes().split(b"\0")
    return Path(cmd[cmd.index(b"--model") + 1].decode()).parent


def _alive(pids: list[int], within: float) -> list[int]:
    """Those of `pids` still running (zombies aside) after waiting up to `within` seconds."""
    def running(pid: int) -> bool:
        try:
            return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except (OSError, IndexError):
            return False

    deadline = time.time() + within
    while time.time() < deadline and any(running(p) for p in pids):
        time.sleep(0.1)
    return [p for p in pids if running(p)]


@pytest.fixture(scope="module")
def reference(tmp_path_factory, cold_start_model) -> Path:
    cfg, run_dir = _config(tmp_path_factory.mktemp("one"), "one", cold_start_model)
    _train(cfg)
    return run_dir


def test_a_server_killed_mid_run_changes_nothing(tmp_path, reference, cold_start_model):
    cfg, run_dir = _config(tmp_path, "killed", cold_start_model)
    proc = _start([sys.executable, "-m", "rlvr.cli", "train", str(cfg)])
    metrics, deadline = run_dir / "metrics.jsonl", time.time() + 300
    while time.time() < deadline and proc.poll() is None and \
            (not metrics.exists() or len(metrics.read_text().splitlines()) < 2):
        time.sleep(0.2)
    servers = _servers_of(proc.pid)
    assert len(servers) == 2, servers
    os.kill(servers[1], signal.SIGKILL)
    err = _finish(proc)
    assert "died; restarting it" in err, err[-3000:]
    killed, ref = _metrics(run_dir), _metrics(reference)
    assert [r["step"] for r in killed] == [r["step"] for r in ref]
    assert killed == ref
    assert _completions(run_dir, STEPS - 1) == _completions(reference, STEPS - 1)
    trained = [r for r in ref if "mismatch/kl" in r]
    canary = [r["mismatch/canary_kl"] for r in ref if "mismatch/canary_kl" in r]
    print(f"2 servers, one killed after step 1: metrics equal; max mismatch/kl over {len(trained)} "
          f"updates {max(r['mismatch/kl'] for r in trained):.1e}, max canary_kl {max(canary):.1e}")
    assert trained and len(canary) >= STEPS - 1   # steps whose groups all tie make no update
    assert max(r["mismatch/kl"] for r in trained) < 1e-9 and max(canary) < 1e-6


def test_kill_of_the_whole_job_then_resume_is_exact(tmp_path, reference, cold_start_model):
    cfg, run_dir = _config(tmp_path, "resumed", cold_start_model, save_every=2)
    proc = _start([sys.executable, "-m", "rlvr.cli", "train", str(cfg)])
    marker, deadline = run_dir / "checkpoints" / "step-000002" / "COMPLETE", time.time() + 300
    while not marker.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before its first checkpoint"
    servers = _servers_of(proc.pid)
    assert len(servers) == 2, servers
    weights = {_weights_dir(pid) for pid in servers}
    assert all(d.is_dir() for d in weights), weights
    os.killpg(proc.pid, signal.SIGKILL)   # the trainer's process group: the servers are not in it
    proc.communicate()
    assert not (run_dir / "final").exists()
    left = _alive(servers, within=10)
    assert not left, f"vLLM servers {left} outlived the trainer killed with -9"
    assert not [d for d in weights if d.exists()], f"{weights} left in shared memory by the killed job"
    _train(cfg)   # the relaunch resumes from step-000002
    assert _metrics(run_dir) == _metrics(reference)
    digest = [hashlib.sha256((d / "final" / "model.safetensors").read_bytes()).hexdigest()
              for d in (run_dir, reference)]
    assert digest[0] == digest[1]


@pytest.mark.parametrize("mode", ["ddp", "fsdp2"])
def test_torchrun_ranks_with_servers_sample_what_one_process_samples(tmp_path, reference, mode,
                                                                    cold_start_model):
    cfg, run_dir = _config(tmp_path, mode, cold_start_model, f", data_parallel: {mode}")
    _train(cfg, [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"])
    assert _completions(run_dir, 0) == _completions(reference, 0)
    got, ref = _metrics(run_dir), _metrics(reference)
    assert [r["step"] for r in got] == [r["step"] for r in ref]
    worst = max(abs(a[k] - b[k]) for a, b in zip(got, ref) for k in b
                if isinstance(b[k], float) and k in a)
    canary = max(r["mismatch/canary_kl"] for r in got if "mismatch/canary_kl" in r)
    print(f"torchrun {mode} + 2 servers vs one process: first step's completions equal; max metric "
          f"|Δ| over {STEPS} steps {worst:.1e}; max canary_kl {canary:.1e}")
    assert canary < 1e-6


def test_rollouts_one_step_ahead_on_the_servers_carry_their_version(tmp_path, cold_start_model):
    """max_staleness 1: step s >= 1 trains on samples of version s - 1, generated on the same
    servers (a view with its own version) while step s - 1 updates."""
    cfg, run_dir = _config(tmp_path, "ahead", cold_start_model, rollout_extra=", max_staleness: 1")
    _train(cfg)
    rows, got = _rows(run_dir), _metrics(run_dir)
    assert {r["step"]: r["policy_version"] for r in rows} == {s: max(0, s - 1) for s in range(STEPS)}
    trained = [r for r in got if "mismatch/kl" in r]
    canary = [r["mismatch/canary_kl"] for r in got if "mismatch/canary_kl" in r]
    assert [r["async/staleness"] for r in got if "async/staleness" in r] == [0.0] + [1.0] * (STEPS - 1)
    kl = ", ".join(f"{r['mismatch/kl']:.1e}" for r in trained)
    print(f"max_staleness 1 on 2 servers: mismatch/kl per step {kl}; max canary_kl {max(canary):.1e}")
    assert max(canary) < 1e-6


def test_agent_episodes_through_the_servers(tmp_path):
    agent_model = tmp_path / "sft"   # a short cold start: the agentic tokenizer, a few SFT steps
    subprocess.run([sys.executable, "-m", "rlvr.cli", "sft", "--task", "agentic", "--out", str(agent_model),
                    "--steps", "10", "--batch-size", "16", "--threads", "1"],
                   check=True, capture_output=True, timeout=600, env=_env())
    """Episodes continue from token ids on the servers (`continue_ids`): the trainer's log-probs
    of every sampled token match the servers' behaviour log-probs as on the in-process engine."""
    # a barely trained model earns little reward: every group is still trained on (zero advantage),
    # so every step measures the trainer's log-probs against the servers'
    cfg, run_dir = _config(tmp_path, "agentic", agent_model, task="agentic",
                           grpo_extra=", skip_zero_advantage: false")
    _train(cfg)
    got = _metrics(run_dir)
    trained = [r for r in got if "mismatch/kl" in r]
    canary = [r["mismatch/canary_kl"] for r in got if "mismatch/canary_kl" in r]
    print(f"agent episodes on 2 servers: max mismatch/kl {max(r['mismatch/kl'] for r in trained):.1e}, "
          f"max canary_kl {max(canary):.1e}")
    assert len(trained) == STEPS and max(r["mismatch/kl"] for r in trained) < 1e-9
    assert max(canary) < 1e-6
