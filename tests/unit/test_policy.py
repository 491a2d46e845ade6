"""Policy loading: chat templates for message prompts, the reference model only when beta > 0."""

from __future__ import annotations

import json

from rlvr import config
from rlvr.models.policy import encode_prompt, load_policy
from rlvr.models.tiny import build_tokenizer
from rlvr.types import Problem


def test_chat_template_is_applied_to_message_prompts():
    tok = build_tokenizer()
    tok.chat_template = "{% for m in messages %}{{ m['content'] }}={% endfor %}"
    msgs = [{"role": "user", "content": "12+3"}]
    with_template = encode_prompt(tok, Problem("a", msgs))
    assert tok.decode(with_template, skip_special_tokens=True) == "12+3="
    plain = encode_prompt(tok, Problem("b", "12+3"))
    assert tok.decode(plain, skip_special_tokens=True) == "12+3"     # TRL: text is not templated


def test_text_prompts_get_the_template_only_when_asked(tmp_path):
    from rlvr.rollout.base import SamplingParams
    from rlvr.training.setup import build_engine

    tok = build_tokenizer()
    tok.chat_template = "{% for m in messages %}{{ m['content'] }}={% endfor %}"
    text = Problem("b", "12+3")
    assert tok.decode(encode_prompt(tok, text, template_text=True), skip_special_tokens=True) == "12+3="
    model, _ = load_policy("builtin:tiny-llama")
    for flag, expected in (("false", "12+3"), ("true", "12+3=")):
        cfg = config.from_dict({}, [f"model.chat_template_text={flag}"])
        engine = build_engine(cfg, model, tok)
        [group] = engine.generate([text], 1, SamplingParams(max_new_tokens=1), 0)
        assert tok.decode(group.prompt_ids, skip_special_tokens=True) == expected


def test_saved_tiny_model_round_trips(tmp_path):
    from rlvr.models.tiny import save_tiny_model

    save_tiny_model(tmp_path / "m", seed=1)
    model, tok = load_policy(str(tmp_path / "m"))
    assert type(model).__name__ == "LlamaForCausalLM"
    assert tok.padding_side == "left"
    assert sum(p.numel() for p in model.parameters()) > 1_000_000


def _run(tmp_path, beta):
    from rlvr.training.run import Run

    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"prompt": "1+1=", "reference": "2", "verifier": "arithmetic"}) + "\n")
    cfg = config.from_dict({}, [f"run.dir={tmp_path / f'r{beta}'}", "run.progress=false",
                                "model.path=builtin:tiny-llama", "data.task=", f"data.train_path={data}",
                                f"grpo.beta={beta}", "run.threads=1"])
    return Run.open(cfg).state


def test_reference_model_only_with_kl(tmp_path):
    assert _run(tmp_path, 0.0).reference is None
    state = _run(tmp_path, 0.04)
    assert state.reference is not None and state.reference is not state.policy
    assert not any(p.requires_grad for p in state.reference.parameters())
