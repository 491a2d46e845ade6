"""On a CUDA GPU: engine vs trainer log-probs, learning, exact resume, `rlvr sft` and `rlvr eval`.

Marked `gpu`: collected everywhere, skipped without CUDA (tests/conftest.py). Tolerances: the
sampler's recorded log-probs and the trainer's recomputation on the same tokens agree to
max |Δ| < 1e-3 in float32 and mean |Δ| < 0.02 (max < 0.25) in bf16, where the two paths run
different kernels (a one-token decode step vs a whole-sequence forward) with bf16 matrices.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.gpu
QUICKSTART = str(Path(__file__).resolve().parents[2] / "src" / "rlvr" / "configs" / "quickstart.yaml")


def _engine_vs_trainer(bf16: bool, vocab_pad: int = 0):
    import random

    from rlvr.models.device import Device
    from rlvr.models.tiny import build_model
    from rlvr.rollout.base import SamplingParams
    from rlvr.rollout.hf import HFEngine
    from rlvr.tasks.arithmetic import ArithmeticTask
    from rlvr.models.batch import build_batch
    from rlvr.training.update import Compute, _logp_and_entropy

    model, tok = build_model(seed=1, hidden=128, layers=4, heads=4, mlp=512)
    if vocab_pad:
        model.resize_token_embeddings(len(tok) + vocab_pad)
    device = Device.resolve("cuda", bf16=bf16)
    model.to(device.torch)
    engine = HFEngine(model, tok, device=device)
    problems = ArithmeticTask(2, "+").sample(random.Random(0), 8)
    groups = engine.generate(problems, 4, SamplingParams(max_new_tokens=32), seed=0)
    batch = build_batch(groups, torch.ones(8, 4), engine.pad_id).to(device)
    with torch.no_grad():
        logp, _ = _logp_and_entropy(model, batch, 1.0, bf16, Compute(device, vocab_limit=engine.vocab_limit))
    m = batch.completion_mask.bool()
    diff = (logp - batch.sampling_logp)[m].abs()
    return groups, diff, len(tok)


def test_engine_and_trainer_logprobs_agree_fp32():
    _, diff, _ = _engine_vs_trainer(bf16=False)
    print(f"fp32 engine vs trainer: max |d| {diff.max():.2e}, mean {diff.mean():.2e}")
    assert float(diff.max()) < 1e-3


def test_engine_and_trainer_logprobs_agree_bf16_and_padded_ids_never_sampled():
    groups, diff, vocab = _engine_vs_trainer(bf16=True, vocab_pad=40)
    print(f"bf16 engine vs trainer: max |d| {diff.max():.3f}, mean {diff.mean():.4f}")
    assert float(diff.mean()) < 0.02 and float(diff.max()) < 0.25
    assert all(t < vocab for g in groups for c in g.completions for t in c.token_ids)


def _rlvr(*args, timeout=600):
    out = subprocess.run([sys.executable, "-m", "rlvr.cli", *args], capture_output=True, text=True,
                         timeout=timeout)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    return out.stdout


@pytest.fixture(scope="module")
def sft_on_gpu(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu") / "sft"
    text = _rlvr("sft", "--device", "cuda", "--out", str(out), "--digits", "2", "--steps", "400",
                 "--stop-accuracy", "0.2", "--warmup-steps", "30")
    assert json.loads((out / "sft_summary.json").read_text())["accuracy"] >= 0.2, text
    return out


def _metrics(run_dir: Path) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_grpo_on_gpu_raises_reward(sft_on_gpu, tmp_path):
    run = tmp_path / "grpo"
    _rlvr("train", QUICKSTART, f"model.path={sft_on_gpu}", f"run.dir={run}",
          "run.device=cuda", "data.difficulty=2", "grpo.steps=30", "grpo.lr=2e-4", "run.eval_every=0",
          "data.heldout_size=100", "run.progress=false", "run.report=false")
    rows = [r for r in _metrics(run) if "reward/mean" in r]
    first, last = (sum(r["reward/mean"] for r in rows[i]) / 8 for i in (slice(0, 8), slice(-8, None)))
    print(f"GPU GRPO reward: first 8 steps {first:.3f}, last 8 steps {last:.3f}")
    assert last > first + 0.05
    assert all(r["memory/peak_gb"] > 0 for r in rows)


def test_resume_on_gpu_is_exact_in_deterministic_mode(tmp_path):
    from rlvr import config
    from rlvr.train import train

    common = ["model.path=builtin:tiny-llama", "run.device=cuda", "run.deterministic=true",
              "grpo.steps=4", "run.save_every=2", "run.keep_last=4", "grpo.beta=0.04",
              "grpo.prompts_per_step=4", "grpo.group_size=4", "data.heldout_size=8",
              "run.progress=false", "run.report=false", "rollout.max_new_tokens=16"]
    full = tmp_path / "full"
    train(config.load(QUICKSTART, common + [f"run.dir={full}"]))
    resumed = tmp_path / "resumed"
    train(config.load(QUICKSTART, common + [
        f"run.dir={resumed}", f"run.resume={full / 'checkpoints' / 'step-000002'}"]))
    from safetensors.torch import load_file
    a = load_file(str(full / "final" / "model.safetensors"))
    b = load_file(str(resumed / "final" / "model.safetensors"))
    assert all(torch.equal(a[k], b[k]) for k in a)
    keep = ("loss", "reward/mean", "kl", "entropy")

    def rows(run_dir):
        return [{k: r[k] for k in keep if k in r} for r in _metrics(run_dir)
                if r.get("step", -1) >= 2 and "loss" in r]
    assert rows(full) == rows(resumed) and rows(full)


def test_eval_cli_on_gpu(sft_on_gpu, tmp_path):
    _rlvr("eval", str(sft_on_gpu), "--out", str(tmp_path / "ev"), "--device", "cuda", "--n", "32",
          "--k", "1,4", "--digits", "2", "--temperatures", "", "--budgets", "0,20")
    result = json.loads((tmp_path / "ev" / "eval.json").read_text())
    assert result["greedy_accuracy"] >= 0.1 and result["pass@4"] >= result["pass@1"]
