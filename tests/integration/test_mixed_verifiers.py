"""One dataset mixing math, code, constraints, format and TRL-function rows trains in one `rlvr
train` run, with metrics per verifier. The tiny model's characters (digits, + - = | > and space)
fix some rewards exactly: it cannot write a comma (constraint no_commas: always 1), a `<` (format:
always 0) or a code fence (code: always 0), and the TRL function below returns 0.25 for anything."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

ROWS = [
    {"id": "m", "prompt": "1+1=", "reference": "2", "verifier": "math"},
    {"id": "c", "prompt": "22=", "verifier": "code",
     "tests": {"entry_point": "sq", "cases": [{"args": [2], "expected": 4}]}},
    {"id": "k", "prompt": "3+3=", "verifier": "constraints", "constraints": [{"type": "no_commas"}]},
    {"id": "f", "prompt": "4+4=", "verifier": "format"},
    {"id": "t", "prompt": "5+5=", "solution": "10"},            # no verifier: data.reward_funcs
]
EXACT = {"constraints": 1.0, "format": 0.0, "code": 0.0, "reward_funcs": 0.25}


def test_mixed_dataset_trains_with_per_verifier_metrics(tmp_path):
    data = tmp_path / "mixed.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    (tmp_path / "quarter.py").write_text(
        "def quarter(prompts, completions, solution, **kwargs):\n"
        "    assert solution == ['10'] * len(completions)\n"
        "    return [0.25] * len(completions)\n")
    cfg = tmp_path / "mixed.yaml"
    cfg.write_text(
        f"run: {{dir: {tmp_path / 'run'}, eval_every: 3, save_every: 0, progress: false, threads: 1,"
        " report: false}\n"
        f"data: {{task: '', train_path: {data}, eval_path: {data},"
        f" reward_funcs: [{{fn: '{tmp_path / 'quarter.py'}:quarter'}}]}}\n"
        "rollout: {max_new_tokens: 8}\n"
        "grpo: {steps: 3, group_size: 4, prompts_per_step: 5}\n")
    proc = subprocess.run([sys.executable, "-m", "rlvr.cli", "train", str(cfg)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [json.loads(l) for l in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in lines if "reward/mean" in r]
    assert len(steps) == 3
    names = ["code", "constraints", "format", "math", "reward_funcs"]
    for r in steps:
        for name in names:                      # each step holds every row once: 4 of 20 completions
            assert r[f"reward/{name}/share"] == pytest.approx(0.2)
        for name, value in EXACT.items():
            assert r[f"reward/{name}/mean"] == value
        assert r["reward/constraints/accuracy"] == 1.0 and r["reward/format/accuracy"] == 0.0
        assert r["reward/mean"] == pytest.approx(sum(0.2 * r[f"reward/{n}/mean"] for n in names))
        assert r["rewards/quarter/mean"] == 0.25                  # TRL's per-function name
        assert r["sandbox/preferred_tier"] in (0.0, 1.0)          # the code sandbox's tier, every step
    evals = [r for r in lines if "eval/accuracy" in r]
    # a TRL function has no verdict: reward > 0 counts as correct
    assert evals and all(evals[-1][f"eval/{n}/accuracy"] == (n in ("constraints", "reward_funcs"))
                         for n in EXACT)
    assert evals[-1]["eval/reward_funcs/reward"] == 0.25
