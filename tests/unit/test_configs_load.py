from pathlib import Path

import pytest

from rlvr import config

CONFIGS = sorted(config.PRESETS.glob("*.yaml"))


def test_there_are_shipped_configs():
    assert any(p.name == "quickstart.yaml" for p in CONFIGS)


def test_a_preset_loads_by_name_and_an_unknown_name_lists_them():
    assert config.load("quickstart").grpo.steps == config.load(config.PRESETS / "quickstart.yaml").grpo.steps
    with pytest.raises(config.ConfigError, match=r"presets: (\w+, )*quickstart"):
        config.load("quickstrat")


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_every_shipped_config_loads(path):
    cfg = config.load(path)
    assert cfg.grpo.group_size >= 2
