"""Data-parallel training under real `torchrun` launches with 2 gloo ranks on CPU.

- DDP and FSDP2 give the loss and the (clipped) gradients of one process on the same batch, with
  ranks holding unequal token counts (tolerance: 1e-6 absolute on gradients of norm 0.05, 1e-5
  relative on the loss; measured 1.4e-9 and 3.5e-7). FSDP2 also with μ = 2 over two minibatches,
  where the no-grad old-log-prob forward leaves the root's parameters unsharded (once a crash:
  the fused path on mixed DTensor/Tensor weights).
- Each rank's share of the groups (problems r, r + 2, ...) is exactly what a one-process HFEngine
  samples on that share with the rank's seed (`seed_for(seed, f"rank{r}")`), tokens and behaviour log-probs
  bitwise; the weights after one SGD update (lr 1) on those groups are the one-process update's
  (tolerance 1e-6 absolute: the update is the clipped gradient, which matches to that bound, see
  above; measured 3.4e-8); after `load_weights` each rank samples from the updated weights
  (FSDP2: its full copy, which on rank 1 once kept the first weights).
- kill -9 of the whole job after a checkpoint, then a relaunch, ends with the weights and metric
  lines of an uninterrupted 2-rank run.
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
import torch

HERE = Path(__file__).parent
NON_DETERMINISTIC = ("time", "timing/", "tokens_per_s")


def _env() -> dict[str, str]:
    src = str(HERE.parent.parent / "src")
    return {**os.environ, "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo",
            "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _torchrun(*args: str) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", *args]


def _run(cmd: list[str], timeout: float = 600) -> None:
    from quickrun import run_cli

    run_cli(cmd, timeout, _env())


@pytest.fixture(scope="module")
def one_process_update(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("ref") / "ref.pt"
    _run([sys.executable, str(HERE / "update_worker.py"), "none", str(out)])
    return torch.load(out)


@pytest.mark.parametrize("mode", ["ddp", "fsdp2"])
def test_two_ranks_match_one_process(tmp_path, mode, one_process_update):
    out = tmp_path / f"{mode}.pt"
    _run(_torchrun(str(HERE / "update_worker.py"), mode, str(out)))
    ref, got = one_process_update, torch.load(out)
    assert set(got["grads"]) == set(ref["grads"])
    assert got["loss"] == pytest.approx(ref["loss"], rel=1e-5)
    assert got["grad_norm"] == pytest.approx(ref["grad_norm"], rel=1e-5)
    worst = max(float((got["grads"][k] - ref["grads"][k]).abs().max()) for k in ref["grads"])
    assert worst < 1e-6, worst


def test_two_ranks_with_a_distillation_teacher_match_one_process(tmp_path, one_process_update):
    """GRPO + on-policy distillation (coef 1, a teacher of another seed): 2 DDP ranks give the
    one-process first-step loss and gradients, each rank's teacher scoring only its half of the
    rows (the ranks exchange them). distill/kl, like every statistic, is the mean of the ranks' own
    means, so it is not compared."""
    ref, out = tmp_path / "ref.pt", tmp_path / "ddp.pt"
    _run([sys.executable, str(HERE / "update_worker.py"), "none", str(ref), "1", "0", "1"])
    _run(_torchrun(str(HERE / "update_worker.py"), "ddp", str(out), "1", "0", "1"))
    ref, got = torch.load(ref), torch.load(out)
    assert ref["distill_kl"] is not None and ref["loss"] != one_process_update["loss"]   # the teacher acted
    assert ref["teacher_rows"] == [8] and got["teacher_rows"] == [4, 4]
    assert got["loss"] == pytest.approx(ref["loss"], rel=1e-5)
    worst = max(float((got["grads"][k] - ref["grads"][k]).abs().max()) for k in ref["grads"])
    assert worst < 1e-6, worst


def test_fsdp2_with_minibatches_and_two_passes_matches_one_process(tmp_path):
    """μ = 2 over two minibatches: the old-log-prob forward runs without grad first, which leaves
    FSDP2's root parameters unsharded; the update must still take the wrapped model's forward (a
    check of the first parameter's type took the fused path: mixed DTensor/Tensor weights)."""
    ref, out = tmp_path / "ref.pt", tmp_path / "fsdp2.pt"
    _run([sys.executable, str(HERE / "update_worker.py"), "none", str(ref), "2", "4"])
    _run(_torchrun(str(HERE / "update_worker.py"), "fsdp2", str(out), "2", "4"))
    ref, got = torch.load(ref), torch.load(out)
    assert got["loss"] == pytest.approx(ref["loss"], rel=1e-5)
    worst = max(float((got["grads"][k] - ref["grads"][k]).abs().max()) for k in ref["grads"])
    assert worst < 1e-6 and max(float(g.abs().max()) for g in ref["grads"].values()) > 1e-4, worst


def _config(path: Path, run_dir: Path, model: str, body: str) -> Path:
    path.write_text(f"seed: 3\nrun: {{dir: {run_dir}, progress: false, threads: 1, report: false, "
                    f"{body}}}\nmodel: {{path: {model}}}\n")
    return path


def _records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def _one_process_shards(model, tok, seed: int) -> list:
    """The groups of every rank's share, sampled in this one process by a plain HFEngine with the
    rank's seed, in problem order."""
    from shard_worker import N, params, problems

    from rlvr.rollout.hf import HFEngine
    from rlvr.models.device import seed_for

    local, todo = HFEngine(model, tok), problems()
    out: list = [None] * len(todo)
    for r in range(2):
        out[r::2] = local.generate(todo[r::2], N, params(), seed_for(seed, f"rank{r}"))
    return out


@pytest.mark.parametrize("mode", ["ddp", "fsdp2"])
def test_each_rank_samples_its_share_and_updates_like_one_process(tmp_path, mode):
    import shard_worker as w

    from rlvr.models.policy import load_policy

    out = tmp_path / f"{mode}.pt"
    _run(_torchrun(str(HERE / "shard_worker.py"), mode, str(out)))
    got = torch.load(out)
    model, tok = load_policy("builtin:tiny-llama", seed=0)
    start = {k: v.clone() for k, v in model.state_dict().items()}
    before = _one_process_shards(model, tok, w.SEED)
    assert got["before"] == w.signature(before)

    stats = w.one_update(model, before, tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id)
    assert got["loss"] == pytest.approx(stats["loss"], rel=1e-5)
    ref = model.state_dict()
    assert set(got["state"]) == set(ref)
    worst = max(float((got["state"][k] - ref[k]).abs().max()) for k in ref)
    moved = max(float((ref[k] - start[k]).abs().max()) for k in ref)
    print(f"{mode}: one update moves weights by up to {moved:.2e}; ranks vs one process: {worst:.2e}")
    assert moved > 1e-3 and worst < 1e-6, (moved, worst)

    model.load_state_dict(got["state"])          # the ranks' own updated weights, bit for bit
    after = _one_process_shards(model, tok, w.SEED_AFTER)
    assert got["after"] == w.signature(after)


def _short(tmp_path: Path, name: str, mode: str) -> tuple[Path, Path]:
    run_dir = tmp_path / name
    cfg = _config(tmp_path / f"{name}.yaml", run_dir, "builtin:tiny-llama",
                  f"save_every: 2, eval_every: 4, keep_last: 2, data_parallel: {mode}")
    cfg.write_text(cfg.read_text() + "data: {task: arithmetic, difficulty: 2, heldout_size: 16}\n"
                   "rollout: {max_new_tokens: 10}\n"
                   "grpo: {steps: 6, group_size: 4, prompts_per_step: 4, lr: 1.0e-3}\n")
    return cfg, run_dir


def _deterministic(run_dir: Path) -> list[dict]:
    return [{k: v for k, v in r.items() if not k.startswith(NON_DETERMINISTIC)} for r in _records(run_dir)]


@pytest.mark.parametrize("mode", ["fsdp2"])
def test_kill_whole_job_then_resume(tmp_path, mode):
    cfg, run_dir = _short(tmp_path, "killed", mode)
    proc = subprocess.Popen(_torchrun("-m", "rlvr.cli", "train", str(cfg)), env=_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    marker = run_dir / "checkpoints" / "step-000002" / "COMPLETE"
    deadline = time.time() + 300
    while not marker.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    assert proc.poll() is None, "the job ended before its first checkpoint"
    os.killpg(proc.pid, signal.SIGKILL)        # torchrun and both ranks at once
    proc.wait()
    assert not (run_dir / "final").exists()
    _run(_torchrun("-m", "rlvr.cli", "train", str(cfg)))
    ref_cfg, ref_dir = _short(tmp_path, "straight", mode)
    _run(_torchrun("-m", "rlvr.cli", "train", str(ref_cfg)))
    digest = [hashlib.sha256((d / "final" / "model.safetensors").read_bytes()).hexdigest()
              for d in (run_dir, ref_dir)]
    assert digest[0] == digest[1]
    assert _deterministic(run_dir) == _deterministic(ref_dir)
