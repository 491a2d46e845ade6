"""What the vLLM engines do differently on a machine with GPUs, checked on the CPU (no vLLM
needed): the colocated engine empties PyTorch's cache before each wake-up and its memory share
comes off the training budget; local servers get a GPU each, disjoint from the trainer's, or a
refusal naming the counts; the CPU environment, eager mode and float32 stay CPU-only.

Unverified on a GPU here: bench/gpu_check.sh runs the engines there."""

import stat
import subprocess

import pytest
import torch

from rlvr import config
from rlvr.errors import ConfigError
from rlvr.models.tiny import build_model
from rlvr.rollout.vllm import engine as vllm
from rlvr.rollout.vllm import launch as vllm_launch
from rlvr.training.setup import engine_memory_share


class _Recorder:
    """Stands in for `vllm.LLM` only to record the order of the engine's calls on it."""

    def __init__(self, calls: list[str]):
        self.calls = calls

    def wake_up(self, tags=None):
        self.calls.append(f"wake_up:{','.join(tags or ['all'])}")

    def collective_rpc(self, name, args=()):
        self.calls.append(name)

    def reset_prefix_cache(self):
        self.calls.append("reset_prefix_cache")


def test_colocated_engine_empties_the_cache_before_every_wake_up(monkeypatch):
    calls: list[str] = []
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append("empty_cache"))
    engine = object.__new__(vllm.VLLMEngine)
    engine.llm, engine.tied, engine.asleep, engine._canary = _Recorder(calls), True, True, None
    engine.load_weights(build_model(seed=0, hidden=32, layers=2, heads=4, mlp=64)[0], version=1)
    assert calls == ["empty_cache", "wake_up:weights", "rlvr_push_weights", "empty_cache",
                     "wake_up:kv_cache", "reset_prefix_cache"]
    calls.clear()
    engine.asleep = True
    engine._wake()
    assert calls == ["empty_cache", "wake_up:all"] and not engine.asleep


def test_colocated_share_comes_off_the_training_budget():
    cfg = config.load("quickstart", ["rollout.engine=vllm"])
    assert engine_memory_share(cfg) == vllm.GPU_MEMORY_SHARE == 0.3
    cfg = config.load("quickstart", ["rollout.engine=vllm",
                                     "rollout.vllm_options={gpu_memory_utilization: 0.45}"])
    assert engine_memory_share(cfg) == 0.45
    assert engine_memory_share(config.load("quickstart", ["rollout.engine=vllm_server"])) == 0.0


def test_engine_options_and_environment_on_a_gpu_and_on_a_cpu(monkeypatch):
    model, _ = build_model(seed=0, hidden=32, layers=2, heads=4, mlp=64)
    gpu = vllm.engine_options(model, on_gpu=True)
    assert gpu["enforce_eager"] is False and gpu["dtype"] == "bfloat16"
    cpu = vllm.engine_options(model, on_gpu=False)
    assert cpu["enforce_eager"] is True and cpu["dtype"] == "float32"
    assert vllm.engine_options(model, True, {"enforce_eager": True})["enforce_eager"] is True
    assert "VLLM_CPU_KVCACHE_SPACE" not in vllm.engine_env(on_gpu=True)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)
    on_gpu = vllm_launch.server_env("00", on_gpu=True)
    assert "OMP_NUM_THREADS" not in on_gpu and "VLLM_CPU_KVCACHE_SPACE" not in on_gpu
    on_cpu = vllm_launch.server_env("00", on_gpu=False)
    assert on_cpu["OMP_NUM_THREADS"] == "1" and on_cpu["VLLM_CPU_KVCACHE_SPACE"] == "1"


def test_servers_get_the_gpus_after_the_trainers_or_a_refusal_with_the_counts():
    assert vllm_launch.server_gpus(2, ["0", "1", "2", "3"], trainer=1) == ["1", "2"]
    assert vllm_launch.server_gpus(4, ["4", "5", "6", "7", "0", "1", "2", "3"], trainer=4) == \
        ["0", "1", "2", "3"]
    assert vllm_launch.server_gpus(2, [], trainer=1) is None                   # no CUDA: CPU servers
    with pytest.raises(ConfigError, match=r"2 local server\(s\).*trainer's 1 rank.*3 GPUs, but 2 visible"):
        vllm_launch.server_gpus(2, ["0", "1"], trainer=1)


def test_each_spawned_server_process_sees_only_its_gpu(tmp_path):
    """Real child processes (an interpreter stand-in that prints what it sees); a server killed
    and restarted gets the GPU its predecessor left."""
    python = tmp_path / "python"
    python.write_text('#!/bin/sh\necho "gpu=$CUDA_VISIBLE_DEVICES"\n')
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    launcher = vllm_launch.LocalLauncher(str(python), "00", gpus=["1", "2"])

    def seen(proc: subprocess.Popen) -> str:
        out = proc.stdout.read().strip()
        proc.wait()
        return out

    first, second = launcher.spawn(str(tmp_path), {}), launcher.spawn(str(tmp_path), {})
    assert (seen(first), seen(second)) == ("gpu=1", "gpu=2")
    with pytest.raises(RuntimeError, match="every GPU"):
        launcher.spawn(str(tmp_path), {})
    launcher.kill(first)
    assert seen(launcher.spawn(str(tmp_path), {})) == "gpu=1"
