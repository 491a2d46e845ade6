"""The GPU decode's static-cache step, run eagerly on the CPU: the same tokens and log-probs as
the CPU engine, finished rows compacted into smaller buckets, padded vocabulary ids never sampled."""

import pytest
import torch

from rlvr.models.device import Device
from rlvr.models.policy import completion_logits, left_pad, token_logprobs
from rlvr.models.tiny import build_model
from rlvr.rollout.base import SamplingParams
from rlvr.rollout.cuda_decode import GraphDecoder
from rlvr.rollout.hf import HFEngine
from rlvr.tasks.arithmetic import make_problem

torch.set_num_threads(1)
PROBLEMS = [make_problem(12, 345, "+"), make_problem(7, 8, "+"), make_problem(905, 46, "+")]


@pytest.fixture(scope="module")
def tiny():
    model, tokenizer = build_model(seed=3, hidden=32, layers=2, heads=4, mlp=64)
    torch.manual_seed(0)
    with torch.no_grad():       # larger weights than the init: greedy paths that differ by prompt
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0, 0.5)
    return model.eval(), tokenizer


def _decoder(engine, **kw):
    return GraphDecoder(engine.model, Device.cpu(), torch.float32, engine.pad_id, engine.eos_ids,
                        engine.vocab_limit, use_graphs=False, **kw)


def _prompts(engine):
    return [engine.tokenizer(p.prompt)["input_ids"] for p in PROBLEMS]


def test_greedy_static_decode_equals_cpu_engine(tiny):
    model, tokenizer = tiny
    engine = HFEngine(model, tokenizer)
    params = SamplingParams(max_new_tokens=24, greedy=True)
    ref = [c for g in engine.generate(PROBLEMS, 2, params, 0) for c in g.completions]
    # min_bucket=1 and check_every=1: rows that finish early are compacted into smaller buckets
    for kw in ({}, {"min_bucket": 1, "check_every": 1}):
        ours = _decoder(engine, **kw).decode(_prompts(engine), 2, params, seed=0)
        assert [r[0] for r in ours] == [c.token_ids for c in ref]
        assert [r[2] for r in ours] == [c.finish_reason for c in ref]
        for (_, lps, _), c in zip(ours, ref):
            torch.testing.assert_close(torch.tensor(lps), torch.tensor(c.logprobs), atol=1e-4, rtol=0)


def test_compaction_happens_and_keeps_rows(tiny):
    model, tokenizer = tiny
    engine = HFEngine(model, tokenizer)
    params = SamplingParams(max_new_tokens=16, greedy=True)
    free = _decoder(engine)
    free.eos = []                                   # no stop token: every row runs 16 steps
    first = free.decode(_prompts(engine), 4, params, seed=0)
    engine.eos_ids = {first[0][0][1]}               # rows stop at different steps
    ref = [c.token_ids for g in engine.generate(PROBLEMS, 4, params, 0) for c in g.completions]
    dec = _decoder(engine, min_bucket=1, check_every=1)
    sizes = []
    original = dec._step
    dec._step = lambda st, b, *a: (sizes.append(b), original(st, b, *a))
    ours = dec.decode(_prompts(engine), 4, params, seed=0)
    assert [r[0] for r in ours] == ref
    assert len({len(t) for t in ref}) > 1 and min(sizes) < 12


def test_sampled_logprobs_match_trainer_and_seed_repeats(tiny):
    model, tokenizer = tiny
    engine = HFEngine(model, tokenizer)
    params = SamplingParams(temperature=0.7, max_new_tokens=12)
    dec = _decoder(engine)
    rows = dec.decode(_prompts(engine), 3, params, seed=5)
    assert rows == dec.decode(_prompts(engine), 3, params, seed=5)
    assert rows != dec.decode(_prompts(engine), 3, params, seed=6)
    prompts = [p for p in _prompts(engine) for _ in range(3)]
    pi, pm = left_pad(prompts, engine.pad_id)
    comp = [r[0] for r in rows]
    ci = torch.full((len(comp), max(map(len, comp))), engine.pad_id)
    cm = torch.zeros_like(ci)
    for i, c in enumerate(comp):
        ci[i, :len(c)], cm[i, :len(c)] = torch.tensor(c), 1
    with torch.no_grad():
        trainer = token_logprobs(completion_logits(model, pi, pm, ci, cm), ci, temperature=0.7)
    for i, (_, lps, _) in enumerate(rows):
        torch.testing.assert_close(torch.tensor(lps), trainer[i, :len(lps)], atol=1e-4, rtol=0)


def test_padded_vocabulary_ids_are_never_sampled(tiny):
    model, tokenizer = tiny
    engine = HFEngine(model, tokenizer)
    limit = len(tokenizer) - 6          # pretend the last 6 ids are padding rows of the head
    with torch.no_grad():
        saved = model.lm_head.weight[limit:].clone()
        model.lm_head.weight[limit:] = 5 * model.lm_head.weight[:6]   # they would dominate
    try:
        dec = GraphDecoder(model, Device.cpu(), torch.float32, engine.pad_id, engine.eos_ids, limit,
                           use_graphs=False)
        rows = dec.decode(_prompts(engine), 4, SamplingParams(max_new_tokens=12), seed=1)
        unmasked = GraphDecoder(model, Device.cpu(), torch.float32, engine.pad_id, engine.eos_ids,
                                None, use_graphs=False)
        rows_unmasked = unmasked.decode(_prompts(engine), 4, SamplingParams(max_new_tokens=12), seed=1)
    finally:
        with torch.no_grad():
            model.lm_head.weight[limit:] = saved
    assert all(t < limit for r in rows for t in r[0])
    assert any(t >= limit for r in rows_unmasked for t in r[0])   # the mask is what stops them


def _owned(decoder) -> set[int]:
    """Storage addresses of every tensor the decoder's plans hold (what stays alive with them)."""
    seen: set[int] = set()
    for st, _ in decoder.plans.values():
        for value in [*vars(st).values(), *vars(st.samples).values()]:
            for t in value if isinstance(value, list) else [value]:
                if isinstance(t, torch.Tensor):
                    seen.add(t.untyped_storage().data_ptr())
    return seen


def test_tensors_the_step_reads_are_owned_by_the_plan(tiny, monkeypatch):
    """A CUDA graph replays raw addresses: a tensor it reads that only the first call held is freed
    memory from the second call on. On the CPU, emulate that: after each decode, poison every rotary
    table handed out that the plans do not own; a second decode must still equal a fresh decoder's."""
    from rlvr.models import fused_llama

    model, tokenizer = tiny
    engine = HFEngine(model, tokenizer)
    params = SamplingParams(max_new_tokens=12, greedy=True)
    handed: list[torch.Tensor] = []
    table = fused_llama.Weights.rope_table

    def recording(self, length):
        cos, sin = table(self, length)
        handed.extend([cos, sin])
        return cos, sin

    monkeypatch.setattr(fused_llama.Weights, "rope_table", recording)
    dec = _decoder(engine)
    prompts = _prompts(engine)
    for call in range(3):
        ours = dec.decode(prompts[call:] + prompts[:call], 2, params, seed=0)
        ref = _decoder(engine).decode(prompts[call:] + prompts[:call], 2, params, seed=0)
        assert [r[0] for r in ours] == [r[0] for r in ref], call
        for (_, a, _), (_, b, _) in zip(ours, ref):
            torch.testing.assert_close(torch.tensor(a), torch.tensor(b), atol=1e-5, rtol=0)
        owned = _owned(dec)
        with torch.inference_mode():
            for t in handed:        # what the allocator may hand to someone else now
                if t.untyped_storage().data_ptr() not in owned:
                    t.fill_(float("nan"))
    assert len(dec.plans) == 1                          # one plan, replayed by the later calls


def test_plans_are_keyed_on_buckets_and_the_least_recently_used_goes(tiny):
    """Calls of other row counts and budgets within a bucket replay one plan (before: a capture
    each); the training batch's plan, used between other calls, outlives four other plans."""
    model, tokenizer = tiny
    engine = HFEngine(model, tokenizer)
    dec = _decoder(engine)
    prompts = _prompts(engine)
    for p, n, m in ((prompts, 2, 24), (prompts[:2], 2, 20), (prompts[:1], 5, 30)):
        dec.decode(p, n, SamplingParams(max_new_tokens=m, greedy=True), seed=0)
    assert len(dec.plans) == 1
    train = next(iter(dec.plans.values()))
    params = SamplingParams(max_new_tokens=8, greedy=True)
    for n in (16, 32, 64):                              # other buckets: rows 16, 32, 64
        dec.decode(prompts[:1], n, params, seed=0)
        dec.decode(prompts, 2, SamplingParams(max_new_tokens=24, greedy=True), seed=0)
    dec.decode(prompts[:1], 128, params, seed=0)       # a fifth plan: the oldest unused goes
    assert len(dec.plans) == 4 and any(v is train for v in dec.plans.values())
