"""LoRA through PEFT: the fused path steps aside, the reference is the base, checkpoints hold the
adapter, resume restores it, and the adapter loads with PEFT on the base with the same greedy answers."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch

peft = pytest.importorskip("peft")

from rlvr import config  # noqa: E402
from rlvr.models import fused_llama  # noqa: E402
from rlvr.rollout.base import SamplingParams  # noqa: E402
from rlvr.rollout.hf import HFEngine  # noqa: E402
from rlvr.tasks.arithmetic import ArithmeticTask  # noqa: E402
from rlvr.train import train  # noqa: E402


def _cfg(tmp_path: Path, name: str, base: Path, steps: int):
    # beta > 0 exercises the reference (adapters disabled); the entropy bonus makes every step update
    return config.load(None, [
        f"run.dir={tmp_path / name}", "run.save_every=2", "run.eval_every=0", "run.progress=false",
        "run.report=false", "run.threads=1", f"model.path={base}", "model.lora.r=4",
        "model.lora.alpha=8", "data.difficulty=2", "data.heldout_size=8", "rollout.max_new_tokens=8",
        f"grpo.steps={steps}", "grpo.group_size=4", "grpo.prompts_per_step=2", "grpo.lr=1e-2",
        "grpo.beta=0.05", "grpo.entropy_coef=0.01", "grpo.lr_schedule=constant", "seed=1"])


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    from rlvr.models.tiny import save_tiny_model

    path = tmp_path_factory.mktemp("lora") / "base"
    save_tiny_model(path, seed=0)
    return path


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_fused_path_steps_aside_for_adapters(base):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(base)
    assert fused_llama.supports(model)
    wrapped = peft.get_peft_model(model, peft.LoraConfig(r=2, target_modules=["q_proj"]))
    assert not fused_llama.supports(wrapped)


def test_lora_run_saves_an_adapter_that_peft_loads_with_the_same_greedy_answers(tmp_path, base):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    base_hash = _sha(base / "model.safetensors")
    train(_cfg(tmp_path, "full", base, 4))
    final = tmp_path / "full" / "final"
    assert (final / "adapter_config.json").is_file() and not (final / "model.safetensors").exists()
    assert _sha(base / "model.safetensors") == base_hash                  # the base never changes

    tokenizer = AutoTokenizer.from_pretrained(base)
    loaded = peft.PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base), final)
    assert loaded.peft_config["default"].base_model_name_or_path == str(base)
    problems = ArithmeticTask(2, "+").heldout(8)
    greedy = SamplingParams(max_new_tokens=8, greedy=True)
    answers = lambda m: [c.token_ids for g in HFEngine(m, tokenizer).generate(problems, 1, greedy, 0)  # noqa: E731
                         for c in g.completions]
    with_adapter = answers(loaded)                          # PEFT's forward, adapters unmerged
    engine = HFEngine(AutoModelForCausalLM.from_pretrained(base), tokenizer)
    engine.load_weights(loaded, 4)                          # merged weights, fused decode
    merged = [c.token_ids for g in engine.generate(problems, 1, greedy, 0) for c in g.completions]
    assert merged == with_adapter
    with loaded.disable_adapter():
        ids = torch.tensor([[1, 5, 6]])
        base_logits = loaded(input_ids=ids).logits
    assert not torch.allclose(base_logits, loaded(input_ids=ids).logits)   # the adapter learned something

    # resume: 2 steps, then 2 more from the checkpoint, equal 4 uninterrupted (constant lr: the
    # schedule depends on grpo.steps)
    train(_cfg(tmp_path, "resumed", base, 2))
    train(_cfg(tmp_path, "resumed", base, 4))
    assert _sha(tmp_path / "resumed" / "final" / "adapter_model.safetensors") == \
        _sha(final / "adapter_model.safetensors")
