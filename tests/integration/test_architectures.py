"""Every architecture in `rlvr.testing.zoo`: the engine's sampling log-probs and the update's recomputed
log-probs equal a plain Hugging Face forward of each unpadded sequence, and GRPO steps run and
change the weights. The fused path is taken for exactly the families it is tested on."""

from __future__ import annotations

import pytest

from rlvr.models import fused_llama
from rlvr.testing import zoo

FUSED = {"llama", "qwen2"}
TOL = 1e-4   # float32; measured differences are ~1e-6 (bench/architectures.py prints them)


@pytest.mark.parametrize("model_type", sorted(zoo.ARCHITECTURES))
def test_logprobs_match_a_plain_forward(model_type):
    model, tokenizer = zoo.build(model_type, seed=1)
    assert model.config.model_type == model_type
    result = zoo.logprob_parity(model, tokenizer)
    assert result["engine"] == ("fused" if model_type in FUSED else "model")
    assert result["max_len"] > 8        # longer than the sliding windows: they really mask keys
    assert result["sampling_max_abs"] < TOL and result["training_max_abs"] < TOL, result


@pytest.mark.parametrize("model_type", sorted(zoo.ARCHITECTURES))
def test_grpo_steps_run_and_change_the_weights(model_type, tmp_path):
    checkpoint = zoo.save(model_type, tmp_path / "init", seed=2)
    result = zoo.grpo_run(checkpoint, tmp_path / "grpo", steps=2)
    assert result["steps"] == 2 and result["updated_steps"] >= 1, result   # a step whose groups all tie skips
    assert result["max_weight_change"] > 1e-5


def test_fused_path_refuses_what_it_does_not_implement():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    model, _ = zoo.build("qwen2")
    assert fused_llama.supports(model)
    windowed = Qwen2ForCausalLM(Qwen2Config(**{**model.config.to_dict(), "use_sliding_window": True,
                                               "sliding_window": 8, "max_window_layers": 0}))
    assert not fused_llama.supports(windowed)
    assert {t for t in zoo.ARCHITECTURES if fused_llama.supports(zoo.build(t)[0])} == FUSED
