"""The training forward over real tokens only (`models.packed`) gives the padded forward's values
(`fused_llama.completion_head_inputs`) at every real completion token, and gradients to float
rounding; rows it cannot pack go through the padded forward."""

import pytest
import torch

from rlvr.models import fused_llama, packed
from rlvr.models.tiny import build_model
from rlvr.testing import zoo

torch.set_num_threads(1)


def _rows(vocab: int, rows: int, prompt: int, completion: int, share: bool, seed: int = 0):
    """Left-padded prompts (0-2 padding columns; groups of 4 rows share one when `share`) and
    right-padded completions of 1..`completion` tokens."""
    g = torch.Generator().manual_seed(seed)
    n = rows // 4 if share else rows
    p_ids = torch.randint(3, vocab, (n, prompt), generator=g)
    p_mask = (torch.arange(prompt)[None] >= torch.randint(0, 3, (n, 1), generator=g)).long()
    if share:
        p_ids, p_mask = p_ids.repeat_interleave(4, 0), p_mask.repeat_interleave(4, 0)
    c_ids = torch.randint(3, vocab, (rows, completion), generator=g)
    lengths = torch.randint(1, completion + 1, (rows,), generator=g)
    lengths[0] = completion                      # one row as long as the widest
    c_mask = (torch.arange(completion)[None] < lengths[:, None]).long()
    return p_ids, p_mask, c_ids, c_mask


def _value_and_grads(fn, model, inputs, dtype):
    model.zero_grad()
    hidden, head = fn(model, *inputs, dtype)
    weight = torch.linspace(-1, 1, hidden.numel()).view(hidden.shape)
    (hidden.float() * weight).sum().backward()
    return hidden.detach().float(), [p.grad.clone() for p in model.parameters() if p.grad is not None]


MODELS = {"mha": lambda: build_model(seed=3, hidden=32, layers=2, heads=4, mlp=64)[0],
          "gqa": lambda: zoo.gqa_llama(),
          # q/k/v biases: the bucket's zero rows are not zeros past the first projection
          "qwen2": lambda: zoo.build("qwen2", seed=1)[0]}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("share", [False, True])
@pytest.mark.parametrize("arch", sorted(MODELS))
def test_packed_forward_gives_the_padded_forwards_values(arch, share, dtype):
    model = MODELS[arch]()
    # shared prompts run once each only from SHARED_PROMPT_MIN_TOKENS columns up
    width = fused_llama.SHARED_PROMPT_MIN_TOKENS + 3 if share else 7
    inputs = _rows(model.config.vocab_size, 12, width, 9, share)
    assert inputs[3].sum() < inputs[3].numel()   # there is padding to skip
    want, want_grads = _value_and_grads(fused_llama.completion_head_inputs, model, inputs, dtype)
    got, got_grads = _value_and_grads(packed.completion_head_inputs, model, inputs, dtype)
    assert got.shape == (int(inputs[3].sum()), model.config.hidden_size)
    if dtype == torch.float32:
        assert torch.equal(got, want)   # the same rows through the same kernels
    else:   # bf16 matmuls may round a row differently with the row count: two bf16 ulps
        torch.testing.assert_close(got, want, atol=2e-2, rtol=2e-2)
    # weight gradients sum over tokens, padding rows included on one side (as exact zeros)
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    for a, b in zip(got_grads, want_grads):
        torch.testing.assert_close(a, b, atol=tol * float(b.abs().max()), rtol=0)


def test_bucketed_sizes():
    sizes = [packed.bucketed(n) for n in range(1, 20000)]
    assert all(b >= n and (b - n) * 32 <= max(n, 16 * 32) for n, b in enumerate(sizes, 1))
    assert all(b % 16 == 0 for b in sizes)
    # few sizes between any n and 2n: the kernels and blocks of one are reused by the next
    assert max(len(set(sizes[n - 1:2 * n - 1])) for n in (100, 1000, 3000, 9000)) <= 64


@pytest.mark.parametrize("share", [False, True])
def test_the_packed_sequence_is_bucketed(share, monkeypatch):
    """The layers run on `bucketed(N)` rows whatever the micro-batch's real-token count N: two
    micro-batches a few tokens apart give the matmuls one shape (oneDNN compiles a kernel per shape)."""
    model = MODELS["mha"]()
    seen = []
    run_layers = fused_llama.run_layers

    def spy(w, h, *a):
        seen.append(h.shape[1])
        return run_layers(w, h, *a)

    monkeypatch.setattr(fused_llama, "run_layers", spy)
    width = fused_llama.SHARED_PROMPT_MIN_TOKENS + 3 if share else 7
    padded = 0
    for seed in range(6):
        inputs = _rows(model.config.vocab_size, 12, width, 9, share, seed=seed)
        seen.clear()
        packed.completion_head_inputs(model, *inputs)
        n = int(inputs[3].sum()) + (0 if share else int(inputs[1].sum()))   # the packed tokens
        assert seen[-1] == packed.bucketed(n)
        padded += packed.bucketed(n) > n
    assert padded   # the cases did exercise bucket rows


@pytest.mark.parametrize("case", ["empty last prompt column", "a hole in a completion"])
def test_rows_that_cannot_be_packed_take_the_padded_forward(case, monkeypatch):
    model = MODELS["mha"]()
    p_ids, p_mask, c_ids, c_mask = _rows(model.config.vocab_size, 6, 7, 5, False)
    if case == "empty last prompt column":
        p_mask[2] = 0          # an empty prompt: no real position predicts the first token
    else:
        c_mask[1] = torch.tensor([1, 0, 1, 1, 0])
    assert not packed._packable(p_mask, c_mask)
    calls = []
    padded = fused_llama.completion_head_inputs
    monkeypatch.setattr(fused_llama, "completion_head_inputs", lambda *a, **k: calls.append(1) or padded(*a, **k))
    got = packed.completion_head_inputs(model, p_ids, p_mask, c_ids, c_mask)[0]
    assert calls == [1]
    assert torch.equal(got, padded(model, p_ids, p_mask, c_ids, c_mask)[0])
