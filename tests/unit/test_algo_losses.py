import math

import pytest
import torch

from rlvr.algo.kl import KL_ESTIMATORS
from rlvr.algo.losses import AGGREGATIONS, LossSpec, clipped_surrogate, grpo_loss, token_entropy

torch.set_num_threads(1)


def _logs(ratios):
    return torch.log(torch.tensor([ratios], dtype=torch.float64)), torch.zeros(1, len(ratios),
                                                                           dtype=torch.float64)


def test_clip_higher_both_sides():
    logp, old = _logs([1.5, 0.5, 0.5, 1.5, 1.1])
    adv = torch.tensor([[1.0, 1.0, -1.0, -1.0, 1.0]], dtype=torch.float64)
    loss, low, high = clipped_surrogate(logp, old, adv, eps_low=0.2, eps_high=0.28)
    # A>0, ρ=1.5: clipped to 1.28. A>0, ρ=0.5: max(−0.5, −0.8) = −0.5 (unclipped side wins).
    # A<0, ρ=0.5: max(0.5, 0.8) = 0.8 (clipped at 1−0.2). A<0, ρ=1.5: max(1.5, 1.28) = 1.5.
    # A>0, ρ=1.1: inside the range.
    torch.testing.assert_close(loss, torch.tensor([[-1.28, -0.5, 0.8, 1.5, -1.1]],
                                                  dtype=torch.float64))
    assert low.tolist() == [[False, False, True, False, False]]
    assert high.tolist() == [[True, False, False, False, False]]


def test_clipped_tokens_get_no_gradient():
    logp = torch.log(torch.tensor([[1.5, 1.1]])).requires_grad_()
    loss, _, high = clipped_surrogate(logp, torch.zeros(1, 2), torch.tensor([1.0]), 0.2, 0.2)
    loss.sum().backward()
    # d(−A·ρ)/d logp = −A·ρ for the unclipped token; zero for the clipped one
    torch.testing.assert_close(logp.grad, torch.tensor([[0.0, -1.1]]))
    assert high.tolist() == [[True, False]]


def test_dual_clip_caps_negative_advantage_loss():
    logp, old = _logs([5.0, 5.0, 5.0, 0.5])
    adv = torch.tensor([-1.0, -2.0, 1.0, -1.0], dtype=torch.float64)[None]
    plain, _, _ = clipped_surrogate(logp, old, adv, 0.2, 0.2)
    dual, _, _ = clipped_surrogate(logp, old, adv, 0.2, 0.2, dual_clip=3.0)
    torch.testing.assert_close(plain, torch.tensor([[5.0, 10.0, -1.2, 0.8]], dtype=torch.float64))
    # A<0: min(loss, 3·|A|) → 3 and 6; A>0 and small losses are untouched
    torch.testing.assert_close(dual, torch.tensor([[3.0, 6.0, -1.2, 0.8]], dtype=torch.float64))


def test_sequence_advantage_broadcasts_over_tokens():
    logp, old = torch.zeros(2, 3), torch.zeros(2, 3)
    loss, low, high = clipped_surrogate(logp, old, torch.tensor([2.0, -1.0]), 0.2, 0.2)
    torch.testing.assert_close(loss, torch.tensor([[-2.0] * 3, [1.0] * 3]))
    assert low.shape == high.shape == (2, 3)


LOSS = torch.tensor([[1.0, 2.0, 3.0], [4.0, float("nan"), float("inf")]])
MASK = torch.tensor([[1, 1, 1], [1, 0, 0]])


@pytest.mark.parametrize("mode, expected", [
    ("token-mean", (1 + 2 + 3 + 4) / 4),                  # all tokens weigh the same
    ("seq-mean-token-mean", ((1 + 2 + 3) / 3 + 4) / 2),    # each sequence weighs the same
    ("seq-mean-token-sum-norm", ((1 + 2 + 3) / 3 + 4 / 3) / 2),  # sums over constant T=3
])
def test_aggregations_on_hand_values(mode, expected):
    assert AGGREGATIONS[mode](LOSS, MASK).item() == pytest.approx(expected)


@pytest.mark.parametrize("mode, norm, expected", [
    ("token-mean", 8, (1 + 2 + 3 + 4) / 8),
    ("seq-mean-token-mean", 4, ((1 + 2 + 3) / 3 + 4) / 4),
    ("seq-mean-token-sum-norm", 4, ((1 + 2 + 3) / 3 + 4 / 3) / 4),
])
def test_aggregations_with_global_norm(mode, norm, expected):
    assert AGGREGATIONS[mode](LOSS, MASK, norm=norm).item() == pytest.approx(expected)


def test_entropy_matches_brute_force():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 3, 5, generator=g, dtype=torch.float64) * 3
    ent = token_entropy(logits)
    for b in range(2):
        for t in range(3):
            z = [math.exp(x) for x in logits[b, t].tolist()]
            p = [v / sum(z) for v in z]
            assert ent[b, t].item() == pytest.approx(-sum(q * math.log(q) for q in p), rel=1e-6)


def test_entropy_is_stable_for_huge_and_masked_logits():
    logits = torch.tensor([[[1e4, 1e4, float("-inf"), 1e4 - 50.0]]])
    ent = token_entropy(logits)
    assert torch.isfinite(ent).all()
    assert ent.item() == pytest.approx(math.log(2), abs=1e-6)  # two equal modes, rest ≈ 0


def _reference_grpo(logp, old, adv, mask, ref, beta, eps_low, eps_high, ent, coef, mode):
    """The paper's formula, written token by token in plain Python (independent of the code)."""
    per_seq, tokens, total = [], 0, 0.0
    for b in range(len(logp)):
        s, n = 0.0, 0
        for t in range(len(logp[b])):
            if not mask[b][t]:
                continue
            r = math.exp(logp[b][t] - old[b][t])
            surr = min(r * adv[b], min(max(r, 1 - eps_low), 1 + eps_high) * adv[b])
            x = ref[b][t] - logp[b][t]
            token_loss = -surr + beta * (math.exp(x) - x - 1) - coef * ent[b][t]
            s, n = s + token_loss, n + 1
        total, tokens = total + s, tokens + n
        per_seq.append((s, n))
    if mode == "token-mean":
        return total / tokens
    if mode == "seq-mean-token-mean":
        return sum(s / n for s, n in per_seq) / len(per_seq)
    return sum(s / len(logp[0]) for s, _ in per_seq) / len(per_seq)


@pytest.mark.parametrize("mode", sorted(AGGREGATIONS))
def test_grpo_loss_equals_paper_formula(mode):
    logp = [[-1.0, -0.5, -2.0, -0.1], [-0.3, -1.2, -0.7, -0.9], [-2.5, -0.2, -0.4, -1.0]]
    old = [[-1.3, -0.5, -1.0, -0.2], [-0.3, -0.6, -0.7, -0.9], [-2.0, -0.4, -0.4, -3.0]]
    ref = [[-1.1, -0.4, -2.2, -0.3], [-0.5, -1.0, -0.6, -1.4], [-2.4, -0.1, -0.9, -1.0]]
    ent = [[0.5, 1.0, 1.5, 2.0], [0.1, 0.2, 0.3, 0.4], [2.0, 1.0, 0.5, 0.25]]
    mask = [[1, 1, 1, 1], [1, 1, 1, 0], [1, 1, 0, 0]]
    adv = [0.8, -1.1, 0.3]
    t = lambda x: torch.tensor(x, dtype=torch.float64)  # noqa: E731
    spec = LossSpec(eps_low=0.2, eps_high=0.28, beta=0.04, kl_fn=KL_ESTIMATORS["k3"],
                    agg_fn=AGGREGATIONS[mode], entropy_coef=0.01)
    loss, stats = grpo_loss(t(logp), t(old), t(adv), t(mask), spec, ref_logp=t(ref), entropy=t(ent))
    expected = _reference_grpo(logp, old, adv, mask, ref, 0.04, 0.2, 0.28, ent, 0.01, mode)
    assert loss.item() == pytest.approx(expected, rel=1e-12)
    # 9 tokens. log-ratios: seq 0 (A>0) 0.3 (ρ=1.35 > 1.28: high-clipped), 0, −1.0, 0.1;
    # seq 1 (A<0) 0, −0.6 (ρ=0.55 < 0.8: low-clipped), 0; seq 2 (A>0) −0.5, 0.2 (ρ=1.22: inside)
    assert stats["clip_ratio/high_mean"].item() == pytest.approx(1 / 9)
    assert stats["clip_ratio/low_mean"].item() == pytest.approx(1 / 9)
    assert stats["clip_ratio/region_mean"].item() == pytest.approx(2 / 9)
    assert stats["ratio/max"].item() == pytest.approx(math.exp(0.3))
    assert stats["ratio/min"].item() == pytest.approx(math.exp(-1.0))
    assert stats["entropy"].item() == pytest.approx((5.0 + 0.6 + 3.0) / 9)


def test_grpo_loss_stats_without_reference_or_entropy():
    logp = torch.zeros(2, 3, requires_grad=True)
    loss, stats = grpo_loss(logp, torch.zeros(2, 3), torch.tensor([1.0, -1.0]),
                            torch.ones(2, 3), LossSpec(eps_low=0.2, eps_high=0.2))
    assert "kl" not in stats and "entropy" not in stats
    assert stats["ratio/mean"].item() == 1.0 and not stats["ratio/mean"].requires_grad
    assert loss.item() == 0.0  # +1 and −1 advantages cancel at ρ = 1
    loss.backward()
    assert logp.grad is not None


@pytest.mark.parametrize("mode", sorted(AGGREGATIONS))
def test_minibatches_with_global_norm_accumulate_to_the_whole_batch(mode):
    g = torch.Generator().manual_seed(1)
    b, t = 6, 5
    logp = (torch.randn(b, t, generator=g, dtype=torch.float64) * 0.1 - 1).requires_grad_()
    old = logp.detach() + torch.randn(b, t, generator=g, dtype=torch.float64) * 0.3
    ref = logp.detach() + torch.randn(b, t, generator=g, dtype=torch.float64) * 0.2
    adv = torch.randn(b, generator=g, dtype=torch.float64)
    lengths = torch.tensor([5, 1, 3, 4, 2, 5])
    mask = (torch.arange(t)[None] < lengths[:, None]).double()
    spec = LossSpec(eps_low=0.2, eps_high=0.3, beta=0.1, agg_fn=AGGREGATIONS[mode])
    whole, _ = grpo_loss(logp, old, adv, mask, spec, ref_logp=ref)
    (whole_grad,) = torch.autograd.grad(whole, logp)
    norm = float(mask.sum()) if mode == "token-mean" else float(b)
    total, grad = 0.0, torch.zeros_like(logp)
    for part in (slice(0, 2), slice(2, 6)):
        loss, _ = grpo_loss(logp[part], old[part], adv[part], mask[part], spec, ref_logp=ref[part], norm=norm)
        grad += torch.autograd.grad(loss, logp)[0]
        total += loss.item()
    assert total == pytest.approx(whole.item(), rel=1e-12)
    torch.testing.assert_close(grad, whole_grad)


def test_loss_spec_says_once_what_the_update_asks_of_the_aggregation():
    plain = LossSpec()
    assert plain.counts_tokens and not plain.divides_by_padded_length and plain.zero_advantage_inert
    assert plain.with_budget(32) is plain           # only Dr. GRPO's aggregation takes the budget
    dr = LossSpec(agg_fn=AGGREGATIONS["seq-mean-token-sum-norm"])
    assert dr.divides_by_padded_length and not dr.counts_tokens
    bound = dr.with_budget(32)                      # bound: trimming padding no longer changes it
    assert not bound.divides_by_padded_length and bound.agg_fn.keywords == {"budget": 32}
    assert not LossSpec(agg_fn=AGGREGATIONS["seq-mean-token-mean"]).counts_tokens
    for busy in (LossSpec(beta=0.04), LossSpec(entropy_coef=0.01), LossSpec(top_entropy_quantile=0.5)):
        assert not busy.zero_advantage_inert
