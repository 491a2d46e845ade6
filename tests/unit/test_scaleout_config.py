"""Scale-out config keys are validated before anything runs."""

from __future__ import annotations

import pytest

from rlvr import config
from rlvr.errors import ConfigError


@pytest.mark.parametrize("override, field", [("run.data_parallel=zero3", "run.data_parallel"),
                                             ("rollout.workers=0", "rollout.workers"),
                                             ("rollout.engine=tpu", "rollout.engine")])
def test_bad_scaleout_values_name_the_field(override, field):
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        config.load(None, [override])


def test_an_engine_other_than_hf_is_refused_under_torchrun(monkeypatch):
    pytest.importorskip("ray", reason="ray is not installed (make venv-ray)")
    from rlvr.training.setup import check_engine

    cfg = config.load(None, ["rollout.engine=ray"])
    check_engine(cfg)                                  # one process: fine
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ConfigError, match="torchrun"):
        check_engine(cfg)
