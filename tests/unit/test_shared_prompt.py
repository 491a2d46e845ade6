"""The training forward runs a prompt shared by several rows (a GRPO group) once, and gives the same
log-probs and the same gradients as running every row whole: left-padded prompts of different
lengths, rows of a group in any order, right-padded completions of different lengths, grouped-query
attention."""

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from rlvr.models import fused_llama

torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def short_prompts_share(monkeypatch):
    monkeypatch.setattr(fused_llama, "SHARED_PROMPT_MIN_TOKENS", 0)   # the prompts here are 3-7 tokens


def _model(kv_heads: int):
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=kv_heads, intermediate_size=64, max_position_embeddings=64,
                      tie_word_embeddings=True, pad_token_id=0)
    return LlamaForCausalLM(cfg).eval()


def _batch():
    g = torch.Generator().manual_seed(3)
    prompt_len, completion_len = [5, 3, 7], [4, 1, 6, 2, 6, 3, 5, 6, 1]
    groups = [0, 1, 2, 0, 2, 1, 0, 1, 2]            # three rows per prompt, interleaved
    prompts = [torch.randint(1, 50, (n,), generator=g) for n in prompt_len]
    tp, tc = max(prompt_len), max(completion_len)
    p_ids = torch.zeros(len(groups), tp, dtype=torch.long)
    p_mask = torch.zeros_like(p_ids)
    c_ids = torch.zeros(len(groups), tc, dtype=torch.long)
    c_mask = torch.zeros_like(c_ids)
    for row, (grp, n) in enumerate(zip(groups, completion_len)):
        p_ids[row, tp - prompt_len[grp]:] = prompts[grp]
        p_mask[row, tp - prompt_len[grp]:] = 1
        c_ids[row, :n] = torch.randint(1, 50, (n,), generator=g)
        c_mask[row, :n] = 1
    return p_ids, p_mask, c_ids, c_mask


def _logits_and_grads(model, share: bool, dtype=torch.float32):
    model.zero_grad()
    p_ids, p_mask, c_ids, c_mask = _batch()
    logits = fused_llama.completion_logits(model, p_ids, p_mask, c_ids, c_mask, dtype, share_prompts=share)
    weight = torch.randn(logits.shape, generator=torch.Generator().manual_seed(5)) * c_mask[..., None]
    (logits * weight).sum().backward()
    return logits * c_mask[..., None], {n: p.grad.clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize("kv_heads", [4, 2])
def test_shared_prompts_give_the_same_logits_and_gradients(kv_heads):
    model = _model(kv_heads)
    whole, g_whole = _logits_and_grads(model, share=False)
    shared, g_shared = _logits_and_grads(model, share=True)
    assert (shared - whole).abs().max() < 1e-5
    for name, grad in g_whole.items():
        assert torch.allclose(g_shared[name], grad, rtol=1e-4, atol=1e-6), name
    assert grad.abs().max() > 0


def test_each_distinct_prompt_runs_once(monkeypatch):
    rows = []
    real = fused_llama.run_layers
    monkeypatch.setattr(fused_llama, "run_layers",
                        lambda w, h, *a: rows.append(tuple(h.shape[:2])) or real(w, h, *a))
    _logits_and_grads(_model(2), share=True)
    assert rows == [(3, 7), (9, 6)]      # 3 prompts of up to 7 tokens, then 9 completions
    rows.clear()
    _logits_and_grads(_model(2), share=False)
    assert rows == [(9, 13)]


def test_bf16_matrices_agree_with_the_whole_rows_in_bf16():
    model = _model(2)
    whole, _ = _logits_and_grads(model, share=False, dtype=torch.bfloat16)
    shared, _ = _logits_and_grads(model, share=True, dtype=torch.bfloat16)
    assert (shared - whole).abs().max() < 0.05


def test_short_prompts_run_whole_rows(monkeypatch):
    # the built-in tiny model's prompts: the whole-row path, so its runs keep their old numerics
    monkeypatch.setattr(fused_llama, "SHARED_PROMPT_MIN_TOKENS", 8)
    rows = []
    real = fused_llama.run_layers
    monkeypatch.setattr(fused_llama, "run_layers",
                        lambda w, h, *a: rows.append(tuple(h.shape[:2])) or real(w, h, *a))
    _logits_and_grads(_model(2), share=True)
    assert rows == [(9, 13)]
