import math

import pytest
import torch

from rlvr.algo.advantages import ADVANTAGES, group_advantages, rloo_advantages

torch.set_num_threads(1)

SEED_GROUP = torch.tensor([[1.0, 0, 0, 1, 1, 0, 0, 0]])


def test_group_scale_uses_population_std():
    # mean 3/8, population variance 3/8 · 5/8 = 15/64, so std = sqrt(15)/8:
    # (1 − 3/8) / (sqrt(15)/8) = 5/sqrt(15) ≈ +1.291
    # (0 − 3/8) / (sqrt(15)/8) = −3/sqrt(15) ≈ −0.775
    adv = group_advantages(SEED_GROUP, "group", eps=0.0)
    right, wrong = 5 / math.sqrt(15), -3 / math.sqrt(15)
    expected = torch.tensor([[right, wrong, wrong, right, right, wrong, wrong, wrong]])
    torch.testing.assert_close(adv, expected)
    assert adv[0, 0].item() == pytest.approx(1.29, abs=5e-3)
    assert adv[0, 1].item() == pytest.approx(-0.77, abs=5e-3)


def test_group_scale_differs_from_unbiased_std_variant():
    # TRL's unbiased std: variance 15/56, giving 0.625 / sqrt(15/56) ≈ +1.208 (not 1.291).
    adv = group_advantages(SEED_GROUP, "group", eps=0.0)
    unbiased_right = 0.625 / math.sqrt(15 / 56)
    assert unbiased_right == pytest.approx(1.2076, abs=1e-4)
    assert adv[0, 0].item() != pytest.approx(unbiased_right, abs=1e-3)


def test_eps_is_added_to_std():
    adv = group_advantages(torch.tensor([[1.0, 0.0]]), "group", eps=0.5)
    # std of {1, 0} is 0.5, so the divisor is 1.0 and the centred rewards come out unchanged
    torch.testing.assert_close(adv, torch.tensor([[0.5, -0.5]]))


def test_batch_scale_keeps_group_mean_but_uses_batch_std():
    rewards = torch.tensor([[1.0, 0.0], [1.0, 1.0]])
    # batch {1, 0, 1, 1}: mean 3/4, population std sqrt(3)/4; group 0 centred ±1/2 → ±2/sqrt(3)
    adv = group_advantages(rewards, "batch", eps=0.0)
    expected = torch.tensor([[2 / math.sqrt(3), -2 / math.sqrt(3)], [0.0, 0.0]])
    torch.testing.assert_close(adv, expected)


def test_none_scale_is_centred_rewards():
    adv = group_advantages(SEED_GROUP, "none")
    expected = torch.tensor([[0.625, -0.375, -0.375, 0.625, 0.625, -0.375, -0.375, -0.375]])
    torch.testing.assert_close(adv, expected)


def test_rloo_leave_one_out_baseline():
    adv = rloo_advantages(torch.tensor([[1.0, 0.0, 0.0, 1.0]]))
    # a 1 is compared with the other three {0, 0, 1}: 1 − 1/3; a 0 with {1, 0, 1}: 0 − 2/3
    torch.testing.assert_close(adv, torch.tensor([[2 / 3, -2 / 3, -2 / 3, 2 / 3]]))


def test_rloo_needs_two_samples():
    with pytest.raises(ValueError, match="G=1"):
        rloo_advantages(torch.tensor([[1.0]]))


@pytest.mark.parametrize("mode", sorted(ADVANTAGES))
def test_equal_rewards_give_exactly_zero(mode):
    # three 0.3s have a float mean that is one ulp off 0.3; a tiny std would amplify it
    rewards = torch.tensor([[0.3, 0.3, 0.3], [1.0, 0.0, 1.0]])
    adv = ADVANTAGES[mode](rewards)
    assert (adv[0] == 0).all()
    assert (adv[1] != 0).all()


def test_registry_keys_and_bad_inputs():
    assert set(ADVANTAGES) == {"group", "batch", "none", "rloo"}
    with pytest.raises(ValueError, match="scale"):
        group_advantages(SEED_GROUP, "bogus")
    with pytest.raises(ValueError, match=r"\[P, G\]"):
        group_advantages(torch.zeros(4))


def test_integer_rewards_are_accepted():
    adv = ADVANTAGES["none"](torch.tensor([[1, 0]]))
    torch.testing.assert_close(adv, torch.tensor([[0.5, -0.5]]))
