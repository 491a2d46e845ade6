"""What `rollout.engine: vllm_server` is allowed with, decided at config time (no vLLM needed)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rlvr import config as config_mod
from rlvr.config.checks import check_combinations, check_launch
from rlvr.errors import ConfigError
from rlvr.rollout.engines import ENGINES


def _cfg(**rollout):
    return config_mod.from_dict({"rollout": {"engine": "vllm_server", **rollout}})


def test_servers_run_under_torchrun_where_the_in_process_engine_is_refused():
    check_launch(_cfg(vllm_servers=2), 2, ENGINES)
    with pytest.raises(ConfigError, match="under torchrun is not supported"):
        check_launch(config_mod.from_dict({"rollout": {"engine": "vllm"}}), 2, ENGINES)


def test_rollouts_ahead_with_servers_in_one_process_only():
    check_combinations(_cfg(max_staleness=1), "vllm_server", False, ENGINES)
    with pytest.raises(ConfigError, match="rollout.max_staleness: not supported under torchrun"):
        check_combinations(_cfg(max_staleness=1), "vllm_server", True, ENGINES)


def test_lora_runs_on_servers_not_on_the_in_process_vllm_engine():
    cfg = config_mod.from_dict({"rollout": {"engine": "vllm_server"}, "model": {"lora": {"r": 4}}})
    check_combinations(cfg, "vllm_server", False, ENGINES)
    with pytest.raises(ConfigError, match="model.lora.r: needs rollout.engine=hf"):
        check_combinations(cfg, "vllm", False, ENGINES)
    with pytest.raises(ConfigError, match="model.lora.r: not supported under torchrun"):
        check_combinations(cfg, "vllm_server", True, ENGINES)


def test_agent_episodes_run_on_servers_and_verifiers_environments_do_not_yet():
    agentic = config_mod.from_dict({"rollout": {"engine": "vllm_server"}, "data": {"task": "agentic"}})
    check_combinations(agentic, "vllm_server", False, ENGINES)
    with pytest.raises(ConfigError, match="rollout.engine: data.task=agentic runs episodes"):
        check_combinations(agentic, "vllm", False, ENGINES)
    vf = config_mod.from_dict({"rollout": {"engine": "vllm_server"}, "data": {"task": "verifiers:m:f"}})
    with pytest.raises(ConfigError, match=r"rollout.engine: data.task=verifiers:\.\.\. runs episodes"):
        check_combinations(vf, "vllm_server", False, ENGINES)


def test_the_server_interpreter_is_the_configured_one_or_a_venv_vllm(tmp_path):
    import importlib.util

    from rlvr.rollout.vllm.launch import server_python

    with pytest.raises(ConfigError, match="rollout.vllm_python: '/no/such/python' does not exist"):
        server_python("/no/such/python")
    if importlib.util.find_spec("vllm") is not None:
        assert server_python() == sys.executable
        return
    with pytest.raises(ConfigError, match="no interpreter with vLLM"):
        server_python("", roots=(tmp_path,))
    python = tmp_path / ".venv-vllm" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("")
    assert server_python("", roots=(tmp_path / "elsewhere", tmp_path)) == str(python)


def test_a_missing_server_interpreter_stops_the_cli_before_anything_is_written(tmp_path):
    run_dir = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "rlvr.cli", "train", "quickstart", f"run.dir={run_dir}",
                           "rollout.engine=vllm_server", "rollout.vllm_python=/no/such/python"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert "rollout.vllm_python: '/no/such/python' does not exist" in proc.stderr
    assert not run_dir.exists()


def test_the_nccl_transport_is_refused_without_cuda_before_anything_is_written(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the nccl transport is allowed here")
    run_dir = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "rlvr.cli", "train", "quickstart", f"run.dir={run_dir}",
                           "rollout.engine=vllm_server", f"rollout.vllm_python={sys.executable}",
                           "rollout.vllm_transport=nccl"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert "rollout.vllm_transport=nccl: needs rollout.engine=vllm_server and CUDA" in proc.stderr
    assert not run_dir.exists()
    with pytest.raises(ConfigError, match="invalid value .files. for rollout.vllm_transport; allowed: shm, nccl"):
        config_mod.from_dict({"rollout": {"engine": "vllm_server", "vllm_transport": "files"}})
