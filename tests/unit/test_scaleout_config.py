"""Scale-out config keys are validated before anything runs."""

from __future__ import annotations

import importlib.util

import pytest

from rlvr import config
from rlvr.errors import ConfigError


@pytest.mark.parametrize("override, field", [("run.data_parallel=zero3", "run.data_parallel"),
                                             ("rollout.workers=0", "rollout.workers")])
def test_bad_scaleout_values_name_the_field(override, field):
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        config.load(None, [override])


def test_an_unknown_engine_is_refused_when_the_run_opens():
    """Engine names are the engine table's (`rlvr.register_engine` adds to it), so the config loads
    and the check when a run opens, before anything is written, names the key and the known ones."""
    from rlvr.training.setup import check_engine

    with pytest.raises(ConfigError, match=r"invalid value 'tpu' for rollout\.engine; allowed: hf, vllm, ray"):
        check_engine(config.load(None, ["rollout.engine=tpu"]))


def test_an_engine_other_than_hf_is_refused_under_torchrun(monkeypatch):
    pytest.importorskip("ray", reason="ray is not installed (make venv-ray)")
    from rlvr.training.setup import check_engine

    cfg = config.load(None, ["rollout.engine=ray"])
    check_engine(cfg)                                  # one process: fine
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ConfigError, match="torchrun"):
        check_engine(cfg)


@pytest.mark.parametrize("override, field", [("model.lora.r=4", "model.lora.r"),
                                             ("rollout.max_staleness=1", "rollout.max_staleness")])
def test_lora_and_running_ahead_are_refused_where_no_code_path_is_tested(monkeypatch, override, field):
    from rlvr.training.setup import check_engine

    check_engine(config.load(None, [override]))        # one process, HF engine: fine
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ConfigError, match=field.replace(".", r"\.") + ".*torchrun"):
        check_engine(config.load(None, [override]))
    monkeypatch.delenv("WORLD_SIZE")
    if importlib.util.find_spec("ray") is not None:
        with pytest.raises(ConfigError, match=field.replace(".", r"\.") + ".*rollout.engine=hf"):
            check_engine(config.load(None, [override, "rollout.engine=ray"]))
