"""`rlvr sft` and `rlvr eval` take `PRESET key=value` like `rlvr train`; every flag is an alias.

Everything here fails or stops before a model loads, so it runs in milliseconds."""

from __future__ import annotations

import pytest

from rlvr.cli.eval import eval_config, options
from rlvr.cli.main import _parse, build_parser, main
from rlvr.cli.sft import sft_config
from rlvr.rollout.engines import ENGINES
from rlvr.config import EvalCommandConfig, SftCommandConfig, check_launch, from_dict
from rlvr.errors import ConfigError


def _args(*argv: str):
    return _parse(build_parser(), list(argv))


def test_sft_keys_and_flags_build_the_same_section():
    flags = sft_config(_args("sft", "--out", "o", "--steps", "3", "--batch-size", "4", "--lr", "1e-4",
                             "--data", "pairs.jsonl"))
    keys = sft_config(_args("sft", "out=o", "steps=3", "batch_size=4", "lr=1e-4", "data=pairs.jsonl"))
    assert flags == keys == SftCommandConfig(out="o", steps=3, batch_size=4, lr=1e-4, data="pairs.jsonl")


def test_eval_checkpoint_keys_and_flags_mix_in_any_order():
    cfg = eval_config(_args("eval", "runs/x/final", "--out", "ev", "k=1,2,4", "--n", "2",
                            "temperatures=", "budgets=[0, 3]"))
    assert cfg == EvalCommandConfig(model="runs/x/final", out="ev", k=(1, 2, 4), n=2, temperatures=(),
                                    budgets=(0, 3))
    assert eval_config(_args("eval", "runs/x/final", "out=ev", "k=4")).k == (4,)
    assert options(eval_config(_args("eval", "m", "--out", "o", "--k", "1,4"))).samples == 4


def test_a_preset_then_flags_then_keys(tmp_path):
    preset = tmp_path / "sft.yaml"
    preset.write_text("out: from-preset\nsteps: 7\nbatch_size: 2\n")
    cfg = sft_config(_args("sft", str(preset), "--steps", "8", "batch_size=3"))
    assert (cfg.out, cfg.steps, cfg.batch_size) == ("from-preset", 8, 3)
    assert sft_config(_args("sft", str(preset), "--steps", "8", "steps=9")).steps == 9   # the key, last
    preset = tmp_path / "eval.yaml"
    preset.write_text("out: ev\nk: [1, 2]\n")
    assert eval_config(_args("eval", str(preset), "runs/x/final")).k == (1, 2)


@pytest.mark.parametrize("argv, needle", [
    (["sft", "out=o", "bogus=1"], "unknown config key 'bogus'"),
    (["eval", "m", "out=o", "nope=3"], "unknown config key 'nope'"),
    (["sft", "out=o", "steps=0"], "invalid value 0 for steps; expected an integer >= 1"),
    (["sft", "--out", "o", "--steps", "0"], "invalid value 0 for --steps"),
    (["sft", "out=o", "task=fractions"], "for task; allowed: arithmetic, agentic"),
    (["sft", "out=o", "task=agentic", "data=x.jsonl"], "task agentic: cannot be combined"),
    (["sft", "steps=3"], "out: required"),
    (["eval", "out=o"], "model: required"),
    (["eval", "m", "out=o", "k=4", "samples=2"], "samples 2 is smaller than the largest k (4)"),
    (["eval", "m", "--out", "o", "--k", "4", "--samples", "2"], "--samples 2 is smaller"),
    (["eval", "m", "out=o", "k=a,b"], "for k[0]"),
    (["eval", "m", "out=o", "budgets=-1,4"], "for budgets"),
    (["sft", "a.yaml", "b.yaml"], "one PRESET at most"),
])
def test_bad_words_exit_2_naming_the_key(argv, needle, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err, err


def test_a_missing_preset_names_the_file(tmp_path, capsys):
    assert main(["sft", str(tmp_path / "none.yaml"), "out=o"]) == 2
    assert "config file not found" in capsys.readouterr().err


def test_unknown_flags_are_still_refused():
    with pytest.raises(SystemExit) as exc:
        main(["eval", "m", "--out", "o", "--bogus", "3"])
    assert exc.value.code == 2


def test_launch_checks_take_the_world_size():
    cfg = from_dict({}, ["model.lora.r=4"])
    check_launch(cfg, 1, ENGINES)
    with pytest.raises(ConfigError, match=r"model\.lora\.r: not supported under torchrun"):
        check_launch(cfg, 2, ENGINES)
    with pytest.raises(ConfigError, match="under torchrun is not supported"):
        check_launch(from_dict({}, ["rollout.engine=ray"]), 2, ENGINES)
