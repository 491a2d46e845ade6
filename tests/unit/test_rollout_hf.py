"""HFEngine: fused Llama decode against transformers, sampling log-probs, finish reasons, seeds."""

import pytest
import torch

from rlvr.models.policy import completion_logits, left_pad, positions, token_logprobs
from rlvr.models import decode_step, fused_llama
from rlvr.rollout.base import SamplingParams
from rlvr.rollout.hf import HFEngine
from rlvr.tasks.arithmetic import make_problem
from rlvr.models.tiny import build_model
from rlvr.models.device import cpu_computes_bf16
from rlvr.testing import zoo

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tiny():
    model, tokenizer = build_model(seed=3, hidden=32, layers=2, heads=4, mlp=64)
    model.eval()
    return model, tokenizer


PROBLEMS = [make_problem(12, 345, "+"), make_problem(7, 8, "+"), make_problem(905, 46, "+")]


def test_fused_forward_matches_transformers_logits(tiny):
    model, tokenizer = tiny
    prompts = [tokenizer(p.prompt)["input_ids"] for p in PROBLEMS]   # different lengths: left padding
    ids, mask = left_pad(prompts, tokenizer.pad_token_id)
    pos = positions(mask)
    dec = decode_step.Decoder(model)
    dec.allocate(len(prompts), ids.shape[1])
    cos, sin = dec.w.rope_table(ids.shape[1])
    with torch.no_grad():
        ours = dec.forward(ids, cos[pos][:, None], sin[pos][:, None], 0, fused_llama.prefix_mask(mask))
        theirs = model(input_ids=ids, attention_mask=mask, position_ids=pos).logits[:, -1]
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)


def test_fused_path_is_chosen_for_llama_only(tiny):
    model, tokenizer = tiny
    assert fused_llama.supports(model)
    assert HFEngine(model, tokenizer)._decode.__name__ == "_decode_fused"
    assert not fused_llama.supports(torch.nn.Linear(2, 2))


def test_greedy_decode_equals_transformers_generate(tiny):
    model, tokenizer = tiny
    groups = HFEngine(model, tokenizer).generate(PROBLEMS, 1, SamplingParams(max_new_tokens=12, greedy=True), 0)
    for problem, group in zip(PROBLEMS, groups):
        ids = tokenizer(problem.prompt, return_tensors="pt")
        out = model.generate(input_ids=ids["input_ids"], attention_mask=ids["attention_mask"], max_new_tokens=12,
                             do_sample=False)[0, ids["input_ids"].shape[1]:].tolist()
        if tokenizer.eos_token_id in out:
            out = out[:out.index(tokenizer.eos_token_id) + 1]
        assert group.completions[0].token_ids == out



def test_temperature_zero_is_greedy_and_a_negative_one_is_refused(tiny):
    model, tokenizer = tiny
    engine = HFEngine(model, tokenizer)
    greedy = engine.generate(PROBLEMS, 2, SamplingParams(max_new_tokens=8, greedy=True), 0)
    zero = engine.generate(PROBLEMS, 2, SamplingParams(max_new_tokens=8, temperature=0.0), 5)
    assert [[c.token_ids for c in g.completions] for g in zero] == \
        [[c.token_ids for c in g.completions] for g in greedy]
    for bad in (-0.5, float("nan")):
        with pytest.raises(ValueError, match="temperature"):
            SamplingParams(temperature=bad)

def _sample(engine, seed, temperature=3.0, max_new=10):
    return engine.generate(PROBLEMS, 6, SamplingParams(temperature=temperature, max_new_tokens=max_new), seed)


def test_sampling_logprobs_equal_a_full_forward_recomputation(tiny):
    model, tokenizer = tiny
    groups = _sample(HFEngine(model, tokenizer), seed=1, temperature=2.0)
    for group in groups:
        comps = group.completions
        prompt_ids, prompt_mask = left_pad([group.prompt_ids] * len(comps), tokenizer.pad_token_id)
        width = max(len(c.token_ids) for c in comps)
        comp_ids = torch.full((len(comps), width), tokenizer.pad_token_id)
        comp_mask = torch.zeros((len(comps), width), dtype=torch.long)
        for i, c in enumerate(comps):
            comp_ids[i, :len(c.token_ids)] = torch.tensor(c.token_ids)
            comp_mask[i, :len(c.token_ids)] = 1
        with torch.no_grad():
            logits = completion_logits(model, prompt_ids, prompt_mask, comp_ids, comp_mask)
        recomputed = token_logprobs(logits, comp_ids, temperature=2.0)
        for i, c in enumerate(comps):
            torch.testing.assert_close(torch.tensor(c.logprobs), recomputed[i, :len(c.token_ids)],
                                       atol=1e-4, rtol=1e-4)


def test_finish_reasons_follow_eos_and_length(tiny):
    model, tokenizer = tiny
    eos, max_new = tokenizer.eos_token_id, 10
    comps = [c for g in _sample(HFEngine(model, tokenizer), seed=2, max_new=max_new) for c in g.completions]
    for c in comps:
        assert eos not in c.token_ids[:-1]
        if c.finish_reason == "stop":
            assert c.token_ids[-1] == eos and "<eos>" not in c.text
        else:
            assert c.finish_reason == "length" and len(c.token_ids) == max_new and c.token_ids[-1] != eos
        assert len(c.logprobs) == len(c.token_ids)
    assert {c.finish_reason for c in comps} == {"stop", "length"}   # rows finished at different steps


def test_same_seed_same_samples_other_seed_other_samples(tiny):
    model, tokenizer = tiny
    engine = HFEngine(model, tokenizer)
    tokens = lambda groups: [c.token_ids for g in groups for c in g.completions]  # noqa: E731
    a, b, c = _sample(engine, 5), _sample(engine, 5), _sample(engine, 6)
    assert tokens(a) == tokens(b)
    assert [c.logprobs for g in a for c in g.completions] == [c.logprobs for g in b for c in g.completions]
    assert tokens(a) != tokens(c)


def test_model_forward_fallback_agrees_with_fused_path(tiny):
    model, tokenizer = tiny
    fused, generic = HFEngine(model, tokenizer), HFEngine(model, tokenizer)
    generic._decode = generic._decode_model
    params = SamplingParams(max_new_tokens=12, greedy=True)
    a, b = fused.generate(PROBLEMS, 2, params, 0), generic.generate(PROBLEMS, 2, params, 0)
    for ga, gb in zip(a, b):
        for ca, cb in zip(ga.completions, gb.completions):
            assert ca.token_ids == cb.token_ids and ca.finish_reason == cb.finish_reason
            torch.testing.assert_close(torch.tensor(ca.logprobs), torch.tensor(cb.logprobs), atol=1e-5, rtol=0)


def test_bf16_decode_stays_close_to_float32(tiny):
    model, tokenizer = tiny
    params = SamplingParams(max_new_tokens=8, greedy=True)
    fp32 = HFEngine(model, tokenizer).generate(PROBLEMS, 1, params, 0)
    bf16 = HFEngine(model, tokenizer, autocast_bf16=True).generate(PROBLEMS, 1, params, 0)
    for g32, g16 in zip(fp32, bf16):
        lp32, lp16 = g32.completions[0].logprobs[0], g16.completions[0].logprobs[0]
        assert abs(lp32 - lp16) < 0.05   # same first step, bf16 rounding of ~1e-2 relative at most
    assert next(model.parameters()).dtype == torch.float32   # master weights untouched


def test_generate_restores_the_thread_count(tiny):
    model, tokenizer = tiny
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        HFEngine(model, tokenizer).generate(PROBLEMS[:1], 2, SamplingParams(max_new_tokens=3), 0)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_grouped_query_attention_matches_transformers_in_decode_and_training():
    model = zoo.gqa_llama()
    ids = torch.tensor([[0, 0, 5, 9, 11], [3, 4, 5, 6, 7]])
    mask = (torch.arange(5) >= torch.tensor([[2], [0]])).long()
    pos = positions(mask)
    dec = decode_step.Decoder(model)
    dec.allocate(2, 5)
    cos, sin = dec.w.rope_table(5)
    with torch.no_grad():
        ours = dec.forward(ids, cos[pos][:, None], sin[pos][:, None], 0, fused_llama.prefix_mask(mask))
        theirs = model(input_ids=ids, attention_mask=mask, position_ids=pos).logits
        train = fused_llama.completion_logits(model, ids[:, :3], mask[:, :3], ids[:, 3:], mask[:, 3:])
    torch.testing.assert_close(ours, theirs[:, -1], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(train, theirs[:, 2:4], atol=1e-5, rtol=1e-5)


def test_sampling_weights_are_rebuilt_exactly_when_a_parameter_changes():
    model = zoo.gqa_llama()
    cache = fused_llama.WeightCache(model)
    first = cache.get()
    assert cache.get() is first                       # unchanged: no second fuse and cast
    with torch.no_grad():
        model.model.layers[1].mlp.up_proj.weight.add_(1.0)   # an optimizer step, in place
    second = cache.get()
    assert second is not first
    up = second.layers[1].wgu[64:]
    torch.testing.assert_close(up, model.model.layers[1].mlp.up_proj.weight)
    model.model.layers[0].self_attn.v_proj.weight.data = torch.zeros(16, 32)   # replaced, not edited
    assert cache.get().layers[0].wqkv[-16:].abs().max() == 0


def test_a_fused_optimizer_step_reaches_sampling_through_load_weights():
    """AdamW(fused=True) leaves version counters alone: the engine's weight sync must still rebuild."""
    model, tokenizer = build_model(seed=5, hidden=32, layers=2, heads=4, mlp=64)
    engine = HFEngine(model, tokenizer)
    params = SamplingParams(max_new_tokens=6, greedy=True)
    engine.generate(PROBLEMS, 1, params, 0)
    before = engine._backends["fused"].weights.get()
    opt = torch.optim.AdamW(model.parameters(), lr=1.0, fused=True)
    for p in model.parameters():
        p.grad = torch.ones_like(p)
    opt.step()
    engine.load_weights(model, 1)
    after = engine._backends["fused"].weights.get()
    assert after is not before
    torch.testing.assert_close(after.layers[0].wgu[:64], model.model.layers[0].mlp.gate_proj.weight)


@pytest.mark.skipif(not cpu_computes_bf16(), reason="matrices are prepacked only where bf16 is native")
def test_bf16_sampling_matrices_are_prepacked_and_give_the_same_bits():
    """oneDNN's prepacked bf16 matmul is the kernel F.linear runs after its per-call reorder: the
    decode's logits, prefill and cached steps, must not change by a bit."""
    first, step = _packed_and_plain_decode(zoo.gqa_llama(), torch.bfloat16)
    assert torch.equal(first[0], first[1]) and torch.equal(step[0], step[1])


@pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="no oneDNN in this torch build")
def test_fp32_sampling_matrices_are_prepacked_at_real_widths_only():
    """In float32 the blocked layout pays at a real model's widths, not at a tiny model's: packed
    from the threshold up (width 512: a 512 x 512 attention output), plain below it, and the
    packed decode's logits equal the plain one's to float32 rounding (oneDNN sums in another order)."""
    narrow = fused_llama.WeightCache(zoo.gqa_llama(hidden=256), torch.float32).get()
    assert narrow.linear is torch.nn.functional.linear
    first, step = _packed_and_plain_decode(zoo.gqa_llama(hidden=512), torch.float32)
    torch.testing.assert_close(first[0], first[1], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(step[0], step[1], atol=1e-5, rtol=1e-5)


def _packed_and_plain_decode(model, dtype):
    """(prefill logits, cached-step logits), each as (packed, plain), of one decode of `model`."""
    packed = fused_llama.WeightCache(model, dtype).get()
    plain = fused_llama.Weights(model, dtype)
    assert packed.linear is not torch.nn.functional.linear and plain.linear is torch.nn.functional.linear
    ids = torch.tensor([[0, 0, 5, 9, 11], [3, 4, 5, 6, 7]])
    mask = (torch.arange(5) >= torch.tensor([[2], [0]])).long()
    pos = positions(mask)
    out = []
    for w in (packed, plain):
        dec = decode_step.Decoder(model, dtype, w)
        dec.allocate(4, 7)
        cos, sin = w.rope_table(7)
        with torch.no_grad():
            first = dec.forward(ids, cos[pos][:, None], sin[pos][:, None], 0, fused_llama.prefix_mask(mask),
                                repeat=2)
            keys = torch.cat([mask.bool().repeat_interleave(2, 0), torch.ones(4, 1, dtype=torch.bool)], 1)
            nxt = pos[:, -1].repeat_interleave(2) + 1
            step = dec.forward(first.argmax(-1)[:, None], cos[nxt][:, None, None], sin[nxt][:, None, None], 5,
                               keys[:, None, None, :6])
        out.append((first, step))
    return (out[0][0], out[1][0]), (out[0][1], out[1][1])
