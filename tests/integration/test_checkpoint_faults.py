"""Checkpoints under attack and under faults, through the real CLI on the tiny model: a hostile
`trainer_state.pt`, a checkpoint copied without its weights, `run.resume=PATH` to an older step, a
full disk (a real tmpfs), a truncated `trackers.json`. Each resumes from the last good checkpoint
or stops with a message naming the file: never a traceback, never the wrong timeline."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from rlvr.errors import UserError
from rlvr.training import checkpoint


def _cfg(run_dir: Path, steps: int) -> list[str]:
    return [sys.executable, "-m", "rlvr.cli", "train", "quickstart", "model.path=builtin:tiny-llama",
            "data.task=arithmetic", "data.heldout_size=4", "rollout.max_new_tokens=8",
            f"grpo.steps={steps}", "grpo.group_size=2", "grpo.prompts_per_step=2",
            f"run.dir={run_dir}", "run.save_every=1", "run.keep_last=10", "run.progress=false",
            "run.threads=1", "run.report=false", "run.eval_every=0"]


def _train(run_dir: Path, steps: int, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(_cfg(run_dir, steps) + list(extra), capture_output=True, text=True,
                          timeout=300)


@pytest.fixture(scope="module")
def four_steps(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("ckpt") / "run"
    done = _train(run_dir, 4)
    assert done.returncode == 0, done.stderr[-3000:]
    return run_dir


@pytest.fixture
def run_dir(four_steps, tmp_path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(four_steps, copy)
    return copy


class _Boom:
    def __reduce__(self):
        return (os.system, (f"touch {os.environ['RLVR_PWNED']}",))


def test_hostile_trainer_state_never_runs_and_names_the_file(run_dir, tmp_path, monkeypatch):
    ckpt = run_dir / "checkpoints" / "step-000004"
    pwned = tmp_path / "pwned"
    monkeypatch.setenv("RLVR_PWNED", str(pwned))
    torch.save({"step": 4, "x": _Boom()}, ckpt / "trainer_state.pt")
    (ckpt / checkpoint.MANIFEST).unlink()
    checkpoint._seal(ckpt)                      # the attacker ships a matching manifest too
    done = _train(run_dir, 4, f"run.resume={ckpt}")
    assert not pwned.exists()
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert f"{ckpt}/trainer_state.pt" in done.stderr


def test_checkpoint_copied_without_its_weights_falls_back_to_the_previous(run_dir):
    (run_dir / "checkpoints" / "step-000004" / "model.safetensors").unlink()
    done = _train(run_dir, 4)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "skipping checkpoint step-000004" in done.stdout + done.stderr
    assert "step-000004/model.safetensors is missing" in done.stdout + done.stderr
    assert "resuming from" in done.stdout and "step-000003 (step 3 of 4)" in done.stdout


def test_truncated_weights_at_resume_path_stop_naming_the_file(run_dir):
    weights = run_dir / "checkpoints" / "step-000002" / "model.safetensors"
    os.truncate(weights, weights.stat().st_size // 2)
    done = _train(run_dir, 4, f"run.resume={weights.parent}")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"{weights} has" in done.stderr


def test_resume_to_an_older_checkpoint_abandons_the_newer_timeline(run_dir):
    root = run_dir / "checkpoints"
    done = _train(run_dir, 3, f"run.resume={root / 'step-000002'}", "run.resume_allow_changes=true")
    assert done.returncode == 0, done.stderr[-3000:]
    # what a later run.resume=auto picks: the step-3 of the timeline resumed, not the abandoned 4
    assert checkpoint.latest(root).name == "step-000003"
    aside = [p for p in root.iterdir() if p.name.startswith("abandoned-")]
    assert [sorted(q.name for q in p.iterdir()) for p in aside] == [["step-000003", "step-000004"]]


def test_truncated_trackers_json_stops_naming_the_file(tmp_path):
    from rlvr.monitor.trackers import IDS_FILE, open_trackers

    (tmp_path / IDS_FILE).write_text('{"mlflow": "ab')
    with pytest.raises(UserError, match=str(tmp_path / IDS_FILE)):
        open_trackers([], tmp_path, "run", {})


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_full_disk_raises_the_alarm_and_leaves_no_partial_directory(four_steps, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    src = four_steps / "checkpoints" / "step-000001"
    model, tok = AutoModelForCausalLM.from_pretrained(src), AutoTokenizer.from_pretrained(src)
    state = checkpoint.load_state(src)
    mnt = tmp_path / "disk"
    mnt.mkdir()
    size = sum(p.stat().st_size for p in src.rglob("*") if p.is_file())
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size * 3 // 2}", "tmpfs", str(mnt)], check=True)
    try:
        alarms: list[dict] = []
        ckpts = checkpoint.Checkpointer(mnt, keep_last=5)
        first = ckpts.save(1, None, state, model, tok, None, alarms.append)
        second = ckpts.save(2, None, state, model, tok, None, alarms.append)   # the disk fills
        assert [a["name"] for a in alarms] == ["checkpoint_failed"], alarms
        assert "previous one is intact" in alarms[0]["message"]
        assert sorted(p.name for p in (mnt / "checkpoints").iterdir()) == ["step-000001"]
        assert checkpoint.verify(first) is None and second != first
    finally:
        subprocess.run(["umount", str(mnt)], check=True)
