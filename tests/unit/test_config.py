import pytest

from rlvr import config
from rlvr.errors import ConfigError


def test_defaults_and_overrides():
    cfg = config.from_dict({}, ["grpo.group_size=4", "grpo.adam_betas=[0.9, 0.98]", "grpo.lr=1e-4"])
    assert cfg.grpo.group_size == 4
    assert cfg.grpo.adam_betas == (0.9, 0.98)
    assert cfg.grpo.lr == pytest.approx(1e-4)
    assert isinstance(cfg.grpo.lr, float)


def test_int_accepted_for_float_but_not_bool_for_int():
    assert config.from_dict({"grpo": {"lr": 1}}).grpo.lr == 1.0
    with pytest.raises(ConfigError, match="grpo.group_size"):
        config.from_dict({"grpo": {"group_size": True}})


@pytest.mark.parametrize("override, needle", [
    ("grpo.foo=1", "unknown config key 'grpo.foo'"),
    ("nosuch.key=1", "unknown config key 'nosuch'"),
    ("grpo.group_size=1", "grpo.group_size; expected an integer >= 2"),
    ("grpo.lr=0", "grpo.lr; expected a number > 0"),
    ("grpo.lr=-1e-3", "grpo.lr"),
    ("grpo.advantage=mean", "allowed: group, batch, none, rloo"),
    ("grpo.loss_agg=sum", "allowed: token-mean, seq-mean-token-mean, seq-mean-token-sum-norm"),
    ("grpo.kl_estimator=k4", "allowed: k1, k2, k3"),
    ("grpo.eps_low=1.5", "grpo.eps_low"),
    ("grpo.dual_clip=0.5", "grpo.dual_clip"),
    ("rollout.temperature=abc", "rollout.temperature"),
    ("rollout.top_p=0", "rollout.top_p"),
    ("curriculum.low=0.95", "curriculum.low must be < curriculum.high"),
    ("grpo=3", "grpo must be a mapping"),
    ("grpo.mu=0", "grpo.mu"),
    ("novalue", "must look like section.key=value"),
])
def test_invalid_values_name_the_key(override, needle):
    with pytest.raises(ConfigError) as err:
        config.from_dict({}, [override])
    assert needle in str(err.value)
    assert "\n" not in str(err.value)


def test_yaml_errors_name_file_and_line(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("grpo:\n  lr: [1,\n")
    with pytest.raises(ConfigError, match=r"bad.yaml:\d+: invalid YAML"):
        config.load(p)
    with pytest.raises(ConfigError, match="not found"):
        config.load(tmp_path / "missing.yaml")


def test_roundtrip_dump_and_load(tmp_path):
    cfg = config.from_dict({}, ["grpo.steps=7", "seed=3"])
    config.dump(cfg, tmp_path / "c.yaml")
    assert config.load(tmp_path / "c.yaml") == cfg


def test_config_module_imports_no_torch():
    import subprocess
    import sys

    code = "import sys, rlvr.config; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_loading_a_config_imports_no_torch_and_no_stage_above_config():
    import subprocess
    import sys

    code = ("import sys; from rlvr import config; config.load('quickstart', "
            "['data.reward_funcs=[{verifier: math}]']); "
            "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith(('rlvr.verifiers', "
            "'rlvr.training', 'rlvr.models'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr + out.stdout
