"""Environments written for `verifiers` (classic API) run unchanged in rlvr (`rlvr.agents.vf`):
the rubric's rewards arrive as rlvr rewards, the tokens trained are the tokens the engine sampled
across turns, environment tokens are masked out and get no gradient, and a GRPO step trains.

Real parts: the verifiers package (its SingleTurnEnv / MultiTurnEnv / Rubric, its OpenAI client
and the openai SDK) talking over local HTTP to rlvr's HF engine on a tiny Llama. No network."""

from __future__ import annotations

import copy

import pytest
import torch

vf = pytest.importorskip("verifiers", minversion="0.3.1")
if not hasattr(vf, "SingleTurnEnv"):      # verifiers 0.4 dropped the classic API
    pytest.skip("verifiers without the classic API (vf.SingleTurnEnv)", allow_module_level=True)

from datasets import Dataset  # noqa: E402

from rlvr.training.update import UpdateSpec  # noqa: E402
from rlvr.agents.vf import VerifiersRollouts, problems_from_env  # noqa: E402
from rlvr.algo.advantages import group_advantages  # noqa: E402
from rlvr.models.tiny import ASCII_CHARS, build_model  # noqa: E402
from rlvr.rollout.base import SamplingParams  # noqa: E402
from rlvr.rollout.hf import HFEngine  # noqa: E402
from rlvr.models.batch import build_batch  # noqa: E402
from rlvr.training.update import update_policy  # noqa: E402

# Multi-character entries the encoder never produces (it splits single characters) but the model
# can sample: re-encoding the decoded text of a turn would not give back the sampled ids.
VOCAB = ASCII_CHARS + ["more", "ee", "oa"]
PARAMS = SamplingParams(max_new_tokens=12)


def vowels(completion, **kwargs) -> float:
    """Share of vowels in the last assistant message."""
    text = completion[-1]["content"] if completion else ""
    return sum(ch in "aeiou" for ch in text) / max(1, len(text))


def has_answer(completion, answer, **kwargs) -> float:
    return float(any(answer in (m["content"] or "") for m in completion if m["role"] == "assistant"))


def rubric():
    return vf.Rubric(funcs=[vowels, has_answer], weights=[2.0, 0.5])


def dataset():
    return Dataset.from_list([{"question": "say a vowel", "answer": "a"},
                              {"question": "say e", "answer": "e"}])


class MoreEnv(vf.MultiTurnEnv):
    """Asks for more after every turn; its own stop condition ends the episode after 3 turns."""

    async def env_response(self, messages, state, **kwargs):
        return [vf.UserMessage(content="more")]

    @vf.stop
    async def three_turns(self, state) -> bool:
        return len(state["trajectory"]) >= 3


class RewriteEnv(MoreEnv):
    """Rewrites the history (drops the model's turn): the server must refuse it, not re-encode."""

    async def get_prompt_messages(self, state):
        if not state["trajectory"]:
            return state["prompt"]
        return list(state["prompt"]) + [vf.UserMessage(content="more")]


class SpyEngine:
    """The real HF engine; records every prefix it is given and every row it returns."""

    def __init__(self, engine):
        self.engine, self.calls = engine, []
        self.pad_id, self.model = engine.pad_id, engine.model

    @property
    def version(self):
        return self.engine.version

    def continue_ids(self, prefixes, params, gen):
        rows = self.engine.continue_ids(prefixes, params, gen)
        self.calls += [(list(p), r) for p, r in zip(prefixes, rows)]
        return rows

    def load_weights(self, policy, version=0):
        self.engine.load_weights(policy, version)


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    model, tok = build_model(chars=VOCAB, max_positions=256)
    return model, tok


def _rollouts(tiny, env, n=3, seed=0):
    model, tok = tiny
    spy = SpyEngine(HFEngine(model, tok))
    r = VerifiersRollouts(env, spy, tok, max_new_tokens=PARAMS.max_new_tokens)
    try:
        return r.generate(problems_from_env(env), n, PARAMS, seed), spy, r
    finally:
        r.close()


def _segments(c):
    """[(start, end)] of the runs of model tokens (loss_mask 1) in a completion."""
    out, start = [], None
    for i, m in enumerate(c.loss_mask + [0]):
        if m and start is None:
            start = i
        if not m and start is not None:
            out.append((start, i))
            start = None
    return out


def test_single_turn_rewards_are_the_rubrics(tiny):
    tok = tiny[1]
    groups, spy, _ = _rollouts(tiny, vf.SingleTurnEnv(dataset=dataset(), rubric=rubric()))
    assert [g.problem.reference for g in groups] == ["a", "e"]
    rewards = []
    for g in groups:
        assert tok.decode(g.prompt_ids) == f"<bos>user: {g.problem.prompt[0]['content']}\nassistant:"
        for c in g.completions:
            assert c.turns == 1 and all(c.loss_mask) and c.finish_reason in ("stop", "length")
            ids = c.token_ids[:-1] if c.finish_reason == "stop" else c.token_ids
            said = [{"role": "assistant", "content": tok.decode(ids, skip_special_tokens=True)}]
            want = 2.0 * vowels(said) + 0.5 * has_answer(said, g.problem.reference)
            assert c.score.reward == pytest.approx(want, abs=1e-12)
            assert c.score.details["metrics"]["vowels"] == pytest.approx(vowels(said))
            rewards.append(c.score.reward)
    assert len(set(rewards)) > 1                       # the check compared distinct values
    assert len(spy.calls) == 6


def test_multi_turn_tokens_trained_are_tokens_sampled(tiny):
    tok = tiny[1]
    groups, spy, _ = _rollouts(tiny, MoreEnv(dataset=dataset(), rubric=rubric(), max_turns=5))
    env_ids = list(tok("\nuser: more\nassistant:", add_special_tokens=False)["input_ids"])
    sampled = {}
    for prefix, (ids, logps, _) in spy.calls:
        sampled.setdefault(tuple(prefix), []).append((ids, logps))
    n_segments = 0
    for g in groups:
        for c in g.completions:
            assert c.turns == 3 and c.score.details["stop_condition"] == "three_turns"
            assert c.finish_reason in ("env", "length")
            segs = _segments(c)
            assert len(segs) == 3 and segs[0][0] == 0
            for k, (a, b) in enumerate(segs):
                # the engine was given exactly the prompt + this episode's ids so far ...
                prefix = tuple(g.prompt_ids + c.token_ids[:a])
                assert prefix in sampled
                # ... and what it returned is what is trained, with its behaviour log-probs
                # (one row each: the rollouts of a group share their first prefix)
                sampled[prefix].remove((c.token_ids[a:b], c.logprobs[a:b]))
                if k:                                   # the environment's message, encoded once
                    assert c.token_ids[segs[k - 1][1]:a] == env_ids
                    assert c.logprobs[segs[k - 1][1]:a] == [0.0] * len(env_ids)
                n_segments += 1
    assert n_segments == len(spy.calls) == 18
    # Sampled ids that decode+re-encode would change (specials, multi-character entries) occur:
    # a re-tokenising path would have failed the prefix checks above.
    multi = {tok.convert_tokens_to_ids(t) for t in ("more", "ee", "oa", "<pad>", "<bos>", "<unk>")}
    assert any(t in multi for _, (ids, _, _) in spy.calls for t in ids)


def test_rewritten_history_is_refused(tiny):
    groups, spy, _ = _rollouts(tiny, RewriteEnv(dataset=dataset(), rubric=rubric(), max_turns=5))
    for c in (c for g in groups for c in g.completions):
        assert c.finish_reason == "error" and "vf_error" in c.score.flags
        assert c.turns == 1 and all(c.loss_mask)        # only the one call that was served
    assert len(spy.calls) == 6


def test_environment_tokens_get_no_gradient(tiny, episode_grads):
    model, tok = tiny
    groups, spy, _ = _rollouts(tiny, MoreEnv(dataset=dataset(), rubric=rubric(), max_turns=5))
    adv = torch.tensor([[1.0, -0.5, 0.25], [-1.0, 0.75, 0.5]])
    batch = build_batch(groups, adv, spy.pad_id)
    # Exact, pad row included: the model can sample <pad> mid-sequence, and the fused path's
    # embedding skips the padding_idx row's gradient as nn.Embedding does.
    got, model_only, every_token = (
        episode_grads.by_update(model, batch),
        episode_grads.reference(model, groups, adv, lambda c: c.loss_mask),
        episode_grads.reference(model, groups, adv, lambda c: [1] * len(c.token_ids)))
    scale = max(float(b.abs().max()) for b in model_only)
    assert max(float((a - b).abs().max()) for a, b in zip(got, model_only)) < 1e-4 * scale
    assert max(float((a - b).abs().max()) for a, b in zip(got, every_token)) > 0.05 * scale


def test_one_grpo_step_changes_weights(tiny):
    model = copy.deepcopy(tiny[0])
    tok = tiny[1]
    env = MoreEnv(dataset=dataset(), rubric=rubric(), max_turns=5)
    rollouts = VerifiersRollouts(env, HFEngine(model, tok), tok, max_new_tokens=PARAMS.max_new_tokens)
    try:
        # 2 x 16 rollouts connect at once (a listen backlog of 5 reset some of them)
        groups = rollouts.generate(problems_from_env(env), 16, PARAMS, seed=1)
    finally:
        rollouts.close()
    rewards = torch.tensor([g.rewards for g in groups])                          # [P, G]
    assert float(rewards.std()) > 0 and all(len(g.completions) == 16 for g in groups)
    before = [p.detach().clone() for p in model.parameters()]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    stats = update_policy(model, opt, build_batch(groups, group_advantages(rewards), tok.pad_token_id),
                          UpdateSpec())
    assert torch.isfinite(torch.tensor(stats["loss"]))
    assert any(not torch.equal(b, p) for b, p in zip(before, model.parameters()))


TEMPLATE = ("{% for m in messages %}{{ '<|' + m['role'] + '|>' + m['content'] + eos_token }}"
            "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}")


def test_chat_template_bridge(tiny):
    """With a chat template, the prompt is the template's and each environment message is the
    template's rendering of it after an assistant turn (from just after the end-of-turn id)."""
    model, tok = tiny[0], copy.deepcopy(tiny[1])
    tok.chat_template = TEMPLATE
    groups, spy, _ = _rollouts((model, tok), MoreEnv(dataset=dataset(), rubric=rubric(), max_turns=5))
    enc = lambda s: list(tok(s, add_special_tokens=False)["input_ids"])   # noqa: E731
    env_ids = enc("<|user|>more") + [tok.eos_token_id] + enc("<|assistant|>")
    for g in groups:
        q = g.problem.prompt[0]["content"]
        assert g.prompt_ids == enc(f"<|user|>{q}") + [tok.eos_token_id] + enc("<|assistant|>")
        for c in g.completions:
            segs = _segments(c)
            assert len(segs) == 3
            assert [c.token_ids[a:b] for (_, a), (b, _) in zip(segs, segs[1:])] == [env_ids] * 2
    assert len(spy.calls) == 18
