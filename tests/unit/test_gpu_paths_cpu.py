"""Small GPU-path fixes checked on the CPU: a checkpoint's trainer state loads onto the CPU
(not back onto GPU 0 on every rank), `run.device: cpu` under torchrun takes gloo on a GPU
machine, and a deterministic-mode run does not leak into the tests after it."""

import pytest
import torch

from rlvr import config
from rlvr.models.device import Device
from rlvr.training import checkpoint, setup


def test_trainer_state_saved_on_a_gpu_loads_onto_the_cpu(tmp_path):
    """A file whose tensors are tagged cuda:0 (as a GPU run writes them): read with the CPU as
    their place, so no rank puts the optimizer state on GPU 0 (and a CPU-only box can read it)."""
    entry = (0, lambda storage: "cuda:0", lambda storage, location: None)
    torch.serialization._package_registry.insert(0, entry)
    try:
        torch.save({"optimizer": {"state": {0: {"exp_avg": torch.ones(3)}}}}, tmp_path / "trainer_state.pt")
    finally:
        torch.serialization._package_registry.remove(entry)
    state = checkpoint.load_state(tmp_path)
    assert state["optimizer"]["state"][0]["exp_avg"].device.type == "cpu"


def test_cpu_device_under_torchrun_on_a_gpu_machine_takes_gloo(monkeypatch):
    import rlvr.training.distributed as distributed

    seen = {}
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(distributed, "DataParallel",
                        lambda mode, backend=None: seen.update(mode=mode, backend=backend))
    setup.build_data_parallel(config.load("quickstart", ["run.device=cpu"]))
    assert seen == {"mode": "ddp", "backend": "gloo"}
    setup.build_data_parallel(config.load("quickstart", ["run.device=auto"]))
    assert seen["backend"] is None                      # NCCL where the GPUs are used


@pytest.mark.parametrize("turn", ["sets", "finds it reset"])
def test_deterministic_mode_does_not_leak_into_later_tests(turn):
    if turn == "sets":
        Device.resolve("cpu", deterministic=True)
        assert torch.are_deterministic_algorithms_enabled()
    else:
        assert not torch.are_deterministic_algorithms_enabled()
