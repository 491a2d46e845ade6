import math

import pytest
import torch

from rlvr.algo.kl import KL_ESTIMATORS, LOG_RATIO_CLAMP, kl_k1, kl_k2, kl_k3

torch.set_num_threads(1)

LN2 = math.log(2.0)


def test_estimators_on_hand_values():
    # policy p=0.5, reference p=0.25 → log r = ln(1/2); and the reverse → log r = ln 2
    logp = torch.log(torch.tensor([[0.5, 0.25]]))
    ref = torch.log(torch.tensor([[0.25, 0.5]]))
    torch.testing.assert_close(kl_k1(logp, ref), torch.tensor([[LN2, -LN2]]))
    torch.testing.assert_close(kl_k2(logp, ref), torch.tensor([[LN2**2 / 2, LN2**2 / 2]]))
    # k3 = r − 1 − log r: 1/2 − 1 + ln 2 ≈ 0.193 and 2 − 1 − ln 2 ≈ 0.307
    torch.testing.assert_close(kl_k3(logp, ref), torch.tensor([[LN2 - 0.5, 1 - LN2]]))


@pytest.mark.parametrize("name", ["k1", "k2", "k3"])
def test_identical_policies_have_zero_kl(name):
    logp = torch.log(torch.tensor([[0.1, 0.7, 0.2]]))
    assert (KL_ESTIMATORS[name](logp, logp) == 0).all()


def test_k1_and_k3_are_unbiased_under_the_policy():
    # exact expectation over a 3-token vocabulary: Σ q·k(x) must equal KL(q‖p) = Σ q log(q/p)
    q = torch.tensor([0.6, 0.3, 0.1], dtype=torch.float64)
    p = torch.tensor([0.2, 0.5, 0.3], dtype=torch.float64)
    true_kl = sum(qi * math.log(qi / pi) for qi, pi in zip(q.tolist(), p.tolist()))
    for fn in (kl_k1, kl_k3):
        estimate = (q * fn(q.log()[None], p.log()[None])[0]).sum().item()
        assert estimate == pytest.approx(true_kl, rel=1e-12)
    assert (q * kl_k2(q.log()[None], p.log()[None])[0]).sum().item() != pytest.approx(true_kl)


def test_log_ratio_is_clamped():
    logp, ref = torch.tensor([[-200.0]]), torch.tensor([[0.0]])
    k3 = kl_k3(logp, ref)
    assert torch.isfinite(k3).all()
    assert k3.item() == pytest.approx(math.exp(LOG_RATIO_CLAMP) - LOG_RATIO_CLAMP - 1, rel=1e-6)
    assert kl_k1(logp, ref).item() == -LOG_RATIO_CLAMP


def test_k2_and_k3_are_nonnegative():
    g = torch.Generator().manual_seed(0)
    logp, ref = torch.randn(4, 7, generator=g), torch.randn(4, 7, generator=g)
    assert (kl_k2(logp, ref) >= 0).all() and (kl_k3(logp, ref) >= 0).all()
