"""A new user's first hour (issue 30): mistakes that used to pass silently are loud now."""

import json
import warnings

import pytest

from rlvr import config
from rlvr.cli.main import main
from rlvr.errors import ConfigError


def test_train_path_with_a_builtin_task_is_refused_naming_what_to_drop(tmp_path, capsys):
    data = tmp_path / "mine.jsonl"
    data.write_text(json.dumps({"prompt": "1+1=", "reference": "2"}) + "\n")
    code = main(["train", "quickstart", "model.path=builtin:tiny-llama", f"data.train_path={data}",
                 f"run.dir={tmp_path / 'run'}"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "data.task='arithmetic'" in err and "data.task=''" in err and "data.train_path" in err
    assert not (tmp_path / "run").exists()
    with pytest.raises(ConfigError, match="data.eval_path"):
        config.from_dict({}, [f"data.eval_path={data}"])
    config.from_dict({}, ["data.task=", f"data.train_path={data}"])   # files alone are fine
    config.from_dict({}, [])                                          # the task alone too


@pytest.mark.parametrize("column", ["reference", "answer", "solution"])
def test_reference_answer_and_solution_are_the_reference_column_alike(tmp_path, column):
    from rlvr.training.setup import build_problems

    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"prompt": "What is 6*7?", column: "42"}) + "\n")
    cfg = config.from_dict({}, ["data.task=", f"data.train_path={data}", "data.verifier=math"])
    verifiers, train, _, _ = build_problems(cfg)
    assert train[0].reference == "42" and column not in train[0].metadata
    assert verifiers["math"].score_batch(["The answer is \\boxed{42}."], train)[0].correct


def test_a_solution_beside_an_answer_stays_a_column_for_reward_functions(tmp_path):
    from rlvr.data import load_problems

    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"prompt": "q", "answer": "4", "solution": "2+2=4"}) + "\n")
    p = load_problems(data, "math")[0]
    assert p.reference == "4" and p.metadata["solution"] == "2+2=4"


def test_the_lr_scheduler_warning_filter_matches_torchs_message():
    import importlib

    import rlvr.train

    importlib.reload(rlvr.train)   # installs the filter (pytest restored the filters after earlier tests)

    torch_says = ("Detected call of `lr_scheduler.step()` before `optimizer.step()`. In PyTorch 1.1.0 and "
                  "later, you should call them in the opposite order: `optimizer.step()` before "
                  "`lr_scheduler.step()`.")
    ours = [f for f in warnings.filters if f[0] == "ignore" and f[1] is not None
            and f[1].pattern == rlvr.train.LR_WARNING]     # not pytest's own (pyproject.toml)
    assert ours and ours[0][1].match(torch_says)


def test_an_all_lowercase_response_can_have_several_sentences():
    from rlvr.types import Problem
    from rlvr.verifiers.constraints import ConstraintsVerifier, count_sentences

    assert count_sentences("i came. i saw. i left.") == 3
    assert count_sentences("It opens at 9 a.m. and closes late.") == 1      # with capitals: unchanged
    spec = [{"type": "letter_case", "args": {"case": "lower"}},
            {"type": "sentence_count", "args": {"relation": "at least", "n": 3}}]
    p = Problem("c", "q", spec, "constraints")
    assert ConstraintsVerifier().score_batch(["i came. i saw. i left."], [p])[0].correct


def test_an_unknown_verifier_option_names_the_key_and_lists_the_valid_ones():
    from rlvr.tasks.base import build_verifiers

    with pytest.raises(ConfigError) as err:
        build_verifiers({"code"}, {"code": {"extrct": "raw"}})
    message = str(err.value)
    assert "data.verifier_options.code.extrct: unknown option" in message
    assert "extract" in message and "timeout_s" in message and "__init__" not in message
