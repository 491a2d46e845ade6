"""`rlvr eval` end to end on the tiny (untrained) model: files, keys, estimator consistency, errors.

An untrained model never solves arithmetic, so the run uses --data with a verifier registered here
that accepts an even first character: correct counts are then neither all zero nor all n, and the
pass@k written to eval.json can be checked against the estimator on the recorded counts.
"""

import json

import pytest

from rlvr.algo.passk import mean_pass_at_k
from rlvr.cli.main import main
from rlvr.models.tiny import save_tiny_model
from rlvr.types import Score
from rlvr.verifiers.base import register_verifier


class EvenFirstChar:
    name = "even-first-char"

    def __init__(self, **_):
        pass

    def check_reference(self, problem):
        return None

    def score_batch(self, responses, problems):
        out = []
        for r in responses:
            first = r[:1] or None
            ok = first is not None and first in "02468"
            out.append(Score(float(ok), ok, (), first))
        return out


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    import torch
    torch.set_num_threads(1)
    register_verifier("even-first-char", EvenFirstChar)
    root = tmp_path_factory.mktemp("eval")
    model = save_tiny_model(root / "model")
    data = root / "data.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"{a}+{a}=", "verifier": "even-first-char"}) + "\n"
                            for a in (12, 345, 67, 890)))
    argv = ["eval", str(model), "--out", str(root / "out"), "--data", str(data), "--k", "1,2,4",
            "--samples", "6", "--max-new-tokens", "6", "--temperatures", "0.5,1.0",
            "--budgets", "0,3,6", "--answer-tokens", "2", "--threads", "1"]
    assert main(argv) == 0
    return model, root, json.loads((root / "out" / "eval.json").read_text())


def test_eval_json_pass_at_k_equals_estimator_on_recorded_counts(run):
    _, _, result = run
    ns, cs = result["samples"]["n"], result["samples"]["correct"]
    assert ns == [6] * 4 and 0 < sum(cs) < sum(ns)       # the check below is not vacuous
    for k in (1, 2, 4):
        assert result[f"pass@{k}"] == pytest.approx(mean_pass_at_k(ns, cs, k))
    assert result["pass@1"] <= result["pass@2"] <= result["pass@4"]
    assert result["pass@1"] == pytest.approx(sum(cs) / sum(ns))


def test_eval_json_has_every_curve_and_the_plots(run):
    _, root, result = run
    assert {"greedy_accuracy", "maj@4", "mean@4", "vote_curve", "temperature_sweep",
            "budget_curve"} <= set(result)
    assert [r["k"] for r in result["vote_curve"]] == [1, 2, 4, 6]
    assert [r["temperature"] for r in result["temperature_sweep"]] == [0.5, 1.0]
    assert result["temperature_sweep"][1]["pass@4"] == result["pass@4"]  # same samples, reused
    assert [r["budget"] for r in result["budget_curve"]] == [0, 3, 6]
    assert all(0 <= r["accuracy"] <= 1 and r["mean_tokens"] > 0 for r in result["budget_curve"])
    for name in ("vote_curve.png", "temperature_sweep.png", "budget_curve.png"):
        assert (root / "out" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("extra, message", [
    (["--k", "0,2"], "--k"), (["--k", "4", "--samples", "2"], "--samples"),
    (["--answer-marker", "@@"], "answer marker"),
])
def test_bad_flags_exit_2(run, tmp_path, capsys, extra, message):
    model, _, _ = run
    assert main(["eval", str(model), "--out", str(tmp_path), "--n", "2", *extra]) == 2
    assert message in capsys.readouterr().err


def test_missing_model_exits_2(tmp_path, capsys):
    assert main(["eval", str(tmp_path / "nope"), "--out", str(tmp_path), "--n", "2"]) == 2
    assert "does not exist" in capsys.readouterr().err
