"""Importance-sampling correction: hand-computed weights and masks, identity when the log-probs
agree, an unbiased gradient under a behaviour policy, and a planted bf16/fp32 mismatch end to end."""

import copy
import math

import pytest
import torch

from rlvr.algo.kl import kl_k3
from rlvr.algo.losses import LossSpec, grpo_loss, token_mean
from rlvr.algo.offpolicy import (CAPPED_METRIC, is_weights, mask_above, mismatch_metrics,
                                 sequence_log_weight, token_log_weight, truncate)
from rlvr.models.batch import build_batch
from rlvr.training.update import UpdateSpec, _logp_and_entropy, update_policy

torch.set_num_threads(1)

OLD = torch.tensor([[0.0, -1.0, -2.0]])
MU = torch.tensor([[0.0, -1.5, -1.0]])        # token 2 is padding: its gap must be ignored
MASK = torch.tensor([[1, 1, 0]])
R = math.exp(0.5)                               # π_old / μ of token 1


@pytest.mark.parametrize("level, mode, cap, weights, capped", [
    (token_log_weight, truncate, 1.5, [1.0, 1.5, 1.0], [False, True, False]),
    (token_log_weight, mask_above, 1.5, [1.0, 0.0, 1.0], [False, True, False]),
    (token_log_weight, truncate, 2.0, [1.0, R, 1.0], [False, False, False]),
    (sequence_log_weight, truncate, 1.5, [1.5, 1.5, 1.0], [True, True, False]),
    (sequence_log_weight, mask_above, 1.5, [0.0, 0.0, 1.0], [True, True, False]),
    (sequence_log_weight, mask_above, 2.0, [R, R, 1.0], [False, False, False]),
])
def test_weights_and_caps_against_hand_values(level, mode, cap, weights, capped):
    w, c = is_weights(OLD, MU, MASK, level=level, mode=mode, cap=cap)
    torch.testing.assert_close(w, torch.tensor([weights]))
    assert c.tolist() == [capped]


def test_sequence_ratio_is_the_product_of_token_ratios():
    old, mu = torch.tensor([[-0.1, -0.2, -0.3]]), torch.tensor([[-0.3, -0.1, -0.5]])
    w, _ = is_weights(old, mu, torch.ones(1, 3), level=sequence_log_weight, cap=100.0)
    torch.testing.assert_close(w, torch.full((1, 3), math.exp(0.2 - 0.1 + 0.2)))


def test_mismatch_metrics_against_hand_values():
    _, capped = is_weights(OLD, MU, MASK, cap=1.5)
    m = mismatch_metrics(OLD, MU, MASK, capped, CAPPED_METRIC["truncate"])
    assert float(m["mismatch/kl"]) == pytest.approx((R - 1 - 0.5) / 2)     # k3 of KL(μ ‖ π_old)
    assert float(m["mismatch/ratio_min"]) == pytest.approx(1.0)
    assert float(m["mismatch/ratio_mean"]) == pytest.approx((1 + R) / 2)
    assert float(m["mismatch/ratio_max"]) == pytest.approx(R)
    assert float(m["mismatch/truncated_frac"]) == pytest.approx(0.5)
    assert mismatch_metrics(OLD, MU, torch.zeros(1, 3)) == {}


def test_identity_when_behaviour_and_trainer_agree():
    logp = torch.randn(4, 6).log_softmax(-1)
    mask = torch.ones(4, 6)
    for level in (token_log_weight, sequence_log_weight):
        for mode in (truncate, mask_above):
            w, c = is_weights(logp, logp.clone(), mask, level=level, mode=mode, cap=1.0)
            assert torch.equal(w, torch.ones_like(w)) and not c.any()
    m = mismatch_metrics(logp, logp.clone(), mask)
    assert float(m["mismatch/kl"]) == 0.0 and float(m["mismatch/ratio_max"]) == 1.0


def test_weights_carry_no_gradient_and_scale_only_the_surrogate():
    logp = torch.tensor([[-1.0, -2.0]], requires_grad=True)
    ref = torch.tensor([[-1.5, -1.0]])
    w = torch.tensor([[2.0, 0.0]], requires_grad=True)
    spec = LossSpec(eps_low=0.2, eps_high=0.2, beta=0.1, kl_fn=kl_k3, agg_fn=token_mean)
    loss, _ = grpo_loss(logp, logp.detach(), torch.tensor([1.0]), torch.ones(1, 2), spec, ref_logp=ref,
                        is_weight=w)
    # surrogate −A·ρ = −1 per token, weighted 2 and 0; plus β·k3 on both tokens, unweighted
    assert float(loss.detach()) == pytest.approx((-2.0 + 0.1 * float(kl_k3(logp, ref).detach().sum())) / 2)
    loss.backward()
    assert w.grad is None


def test_token_correction_removes_the_bias_of_a_behaviour_policy():
    """Single-token bandit: tokens drawn from μ ≠ π. The surrogate's gradient, IS-weighted, is
    the exact ∇ E_π[r]; unweighted it is ∇ E_μ-weighted, far off."""
    theta = torch.tensor([1.0, 0.0, -0.5, 0.5], requires_grad=True)
    reward = torch.tensor([1.0, 0.0, 0.0, 1.0])
    exact = torch.autograd.grad((theta.softmax(-1) * reward).sum(), theta)[0]
    mu = torch.tensor([0.1, 0.2, 0.3, 0.4])
    y = torch.multinomial(mu, 400_000, replacement=True, generator=torch.Generator().manual_seed(0))
    grads = {}
    for name, cap in (("corrected", 1e6), ("uncorrected", None)):
        logp = theta.log_softmax(-1)[y][:, None]                              # [N, 1]
        w = None if cap is None else is_weights(logp, mu.log()[y][:, None], torch.ones_like(logp), cap=cap)[0]
        loss, _ = grpo_loss(logp, logp.detach(), reward[y], torch.ones_like(logp),
                            LossSpec(eps_low=0.2, eps_high=0.2), is_weight=w)
        grads[name] = -torch.autograd.grad(loss, theta)[0]
    torch.testing.assert_close(grads["corrected"], exact, atol=5e-3, rtol=0)
    assert float((grads["uncorrected"] - exact).abs().max()) > 0.05


# ---- end to end: the engine samples in bf16, the trainer trains in fp32 ----------------------

@pytest.fixture(scope="module")
def tiny():
    from rlvr.models.tiny import build_model

    model, tokenizer = build_model(seed=3, hidden=64, layers=2, heads=4, mlp=128)
    return model, tokenizer


def _batch(model, tokenizer, autocast_bf16):
    from rlvr.rollout.base import SamplingParams
    from rlvr.rollout.hf import HFEngine
    from rlvr.tasks.arithmetic import make_problem

    problems = [make_problem(a, b, "+") for a, b in ((12, 345), (7, 8), (905, 46), (31, 4))]
    groups = HFEngine(model, tokenizer, autocast_bf16=autocast_bf16).generate(
        problems, 4, SamplingParams(temperature=1.0, max_new_tokens=12), seed=0)
    adv = torch.tensor([[1.0, -1.0, 0.5, -0.5]] * 4)
    return build_batch(groups, adv, tokenizer.pad_token_id)


def _update(model, batch, correction):
    spec = UpdateSpec(LossSpec(kl_fn=kl_k3, agg_fn=token_mean, eps_low=0.2, eps_high=0.2, dual_clip=0.0,
                               beta=0.0, entropy_coef=0.0),
                      temperature=1.0, grad_clip=0.0, is_weights=correction)
    model = copy.deepcopy(model)
    before = [p.detach().clone() for p in model.parameters()]
    stats = update_policy(model, torch.optim.SGD(model.parameters(), lr=1.0), batch, spec)
    return stats, [p.detach() - b for p, b in zip(model.parameters(), before)]


def test_planted_bf16_sampling_mismatch_shows_and_is_corrected(tiny):
    model, tokenizer = tiny
    same, _ = _update(model, _batch(model, tokenizer, False), None)
    planted_batch = _batch(model, tokenizer, True)
    planted, plain = _update(model, planted_batch, None)
    corrected, fixed = _update(model, planted_batch, is_weights)
    print({k: v for k, v in planted.items() if k.startswith("mismatch/")}, same["mismatch/kl"])
    assert same["mismatch/kl"] < 1e-8                                  # fp32 sampler = fp32 trainer
    assert planted["mismatch/kl"] > 100 * max(same["mismatch/kl"], 1e-9)
    assert planted["mismatch/ratio_max"] > 1.0 > planted["mismatch/ratio_min"]
    assert corrected["mismatch/kl"] == planted["mismatch/kl"]          # metrics do not depend on the fix
    # the correction is the update with every token's surrogate weighted by exp(log π − log μ)
    old = _logp_and_entropy(model, planted_batch, 1.0, False)[0].detach()
    mask = planted_batch.completion_mask.bool()
    w = torch.where(mask, (old - planted_batch.sampling_logp).exp(), torch.ones_like(old))
    _, expected = _update(model, planted_batch, lambda o, b, m: (w, torch.zeros_like(mask)))
    assert any(float((a - b).abs().max()) > 0 for a, b in zip(fixed, plain))
    for a, b in zip(fixed, expected):
        torch.testing.assert_close(a, b, atol=1e-7, rtol=1e-5)


def test_no_extra_forward_pass_for_the_correction_when_mu_is_1(tiny, monkeypatch):
    from rlvr.models import packed

    model, tokenizer = tiny
    batch = _batch(model, tokenizer, True)
    calls = []
    real = packed.completion_head_inputs
    monkeypatch.setattr(packed, "completion_head_inputs", lambda *a, **k: calls.append(1) or real(*a, **k))
    _update(model, batch, None)
    _update(model, batch, is_weights)
    assert len(calls) == 2


@pytest.mark.parametrize("overrides, expected", [
    (["grpo.is_correction=token", "grpo.is_cap=1.5"], [1.0, 1.5, 1.0]),
    (["grpo.is_correction=sequence", "grpo.is_mode=mask", "grpo.is_cap=1.5"], [0.0, 0.0, 1.0]),
])
def test_config_selects_the_correction(overrides, expected):
    from rlvr import config
    from rlvr.training.state import behaviour_correction

    assert behaviour_correction(config.load(None, []).grpo) is None
    fn = behaviour_correction(config.load(None, overrides).grpo)
    torch.testing.assert_close(fn(OLD, MU, MASK)[0], torch.tensor([expected]))
