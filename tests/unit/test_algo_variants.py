"""The loss variants against numbers worked out by hand: GSPO's sequence ratio, CISPO's
detached clipped weight, the high-entropy token share, truncation masking, Dr. GRPO's budget."""

import math

import pytest
import torch

from rlvr.algo.losses import LossSpec, grpo_loss, seq_mean_token_mean, seq_mean_token_sum_norm, token_mean
from rlvr.algo.variants import (cispo_surrogate, high_entropy_mask, mask_truncated, ppo_surrogate,
                                sequence_log_ratio, token_log_ratio)

torch.set_num_threads(1)
D = torch.float64


def test_sequence_ratio_is_the_mean_token_log_ratio_of_each_sequence():
    logp = torch.tensor([[0.2, 0.4, 9.0], [1.0, 1.0, 1.0], [5.0, 5.0, 5.0]], dtype=D)
    mask = torch.tensor([[1, 1, 0], [1, 1, 1], [0, 0, 0]])
    # (0.2 + 0.4) / 2 (padding's 9 left out); (1+1+1)/3; a row without tokens: 0 (ratio 1)
    out = sequence_log_ratio(logp, torch.zeros(3, 3, dtype=D), mask)
    torch.testing.assert_close(out, torch.tensor([[0.3], [1.0], [0.0]], dtype=D))


def test_gspo_clips_the_sequence_ratio_and_spreads_its_gradient_over_the_tokens():
    logp = torch.tensor([[0.2, 0.4, 7.0], [0.2, 0.4, 7.0]], dtype=D, requires_grad=True)
    mask = torch.tensor([[1, 1, 0], [1, 1, 0]])
    adv = torch.tensor([1.0, -1.0], dtype=D)
    loss, low, high = ppo_surrogate(sequence_log_ratio(logp, torch.zeros(2, 3, dtype=D), mask),
                                    logp, adv, 3e-4, 4e-4)
    s = math.exp(0.3)
    # A > 0, s = 1.35 > 1 + 4e-4: clipped, −1.0004 on every token, no gradient.
    # A < 0: max(s, 1.0004) = s, unclipped; averaged over its |y| = 2 tokens (as GSPO's objective
    # is), d/d logp_t = s / |y| = s / 2 on each token.
    torch.testing.assert_close(loss, torch.tensor([[-1.0004] * 3, [s] * 3], dtype=D))
    assert high.tolist() == [[True] * 3, [False] * 3] and not low.any()
    (torch.where(mask.bool(), loss, 0.0).sum() / 2).backward()
    torch.testing.assert_close(logp.grad, torch.tensor([[0, 0, 0], [s / 2, s / 2, 0]], dtype=D))


def test_cispo_keeps_the_gradient_of_tokens_past_the_cap():
    logp = torch.tensor([[math.log(3.0), 0.0, math.log(0.1)]], dtype=D, requires_grad=True)
    old = torch.zeros(1, 3, dtype=D)
    adv = torch.tensor([2.0], dtype=D)
    loss, low, high = cispo_surrogate(token_log_ratio(logp, old, None), logp, adv, 0.2, 1.0)
    # weights: min(3, 2) = 2, 1, 0.1 (no lower bound); loss = −w·A·log π; gradient −w·A
    torch.testing.assert_close(loss, torch.tensor([[-4 * math.log(3.0), 0.0, -0.2 * math.log(0.1)]],
                                                  dtype=D))
    assert high.tolist() == [[True, False, False]] and not low.any()
    loss.sum().backward()
    torch.testing.assert_close(logp.grad, torch.tensor([[-4.0, -2.0, -0.2]], dtype=D))
    _, _, high = cispo_surrogate(torch.tensor([[2.0]]), torch.zeros(1, 1), torch.tensor([-1.0]), 0.2, 1.0)
    assert not high.any()   # past the cap with A < 0 is not counted (as TRL's cispo_clip_ratio)

    # PPO's clip zeroes the first token's gradient where CISPO keeps it
    ppo_logp = logp.detach().clone().requires_grad_()
    ppo, _, _ = ppo_surrogate(token_log_ratio(ppo_logp, old, None), ppo_logp, adv, 0.2, 1.0)
    ppo.sum().backward()
    assert ppo_logp.grad[0, 0] == 0


def test_high_entropy_mask_keeps_the_top_share_of_real_tokens():
    entropy = torch.tensor([[1.0, 2.0, 3.0, 4.0], [5.0, 100.0, 100.0, 100.0]])
    mask = torch.tensor([[1, 1, 1, 1], [1, 0, 0, 0]])
    # the 0.6 quantile of 1..5 is 3.4 (linear): 4 and 5 are kept; padding's 100 never is
    keep = high_entropy_mask(entropy, mask, 0.4)
    assert keep.tolist() == [[False, False, False, True], [True, False, False, False]]
    assert high_entropy_mask(entropy, mask, 1.0).tolist() == mask.bool().tolist()
    assert not high_entropy_mask(entropy, torch.zeros_like(mask), 0.5).any()


def test_kept_tokens_alone_get_the_surrogate_but_all_count_in_the_normaliser():
    logp, old = torch.zeros(1, 4), torch.zeros(1, 4)
    entropy = torch.tensor([[3.0, 1.0, 4.0, 2.0]])   # the top half: tokens 0 and 2
    spec = LossSpec(eps_low=0.2, eps_high=0.2, agg_fn=token_mean, top_entropy_quantile=0.5)
    loss, _ = grpo_loss(logp, old, torch.tensor([1.0]), torch.ones(1, 4), spec, entropy=entropy)
    assert float(loss) == pytest.approx(-2 / 4)   # two tokens of −A·ρ = −1, over four tokens


def test_mask_truncated_zeroes_whole_rows():
    mask = torch.tensor([[1, 1, 0], [1, 1, 1], [1, 0, 0]])
    out = mask_truncated(mask, torch.tensor([False, True, False]))
    assert out.tolist() == [[1, 1, 0], [0, 0, 0], [1, 0, 0]] and out.dtype == mask.dtype


def test_dr_grpo_divides_each_sequence_by_the_generation_budget():
    loss, mask = torch.ones(2, 3), torch.tensor([[1, 1, 0], [1, 1, 1]])
    # sums 2 and 3, each over the budget 10, mean over the 2 sequences
    assert float(seq_mean_token_sum_norm(loss, mask, budget=10)) == pytest.approx((0.2 + 0.3) / 2)
    assert float(seq_mean_token_sum_norm(loss, mask)) == pytest.approx((2 / 3 + 1) / 2)   # T = 3
    # with the budget the result does not depend on the padding
    wide = torch.cat([loss, torch.ones(2, 4)], 1), torch.cat([mask, torch.zeros(2, 4, dtype=torch.long)], 1)
    assert float(seq_mean_token_sum_norm(*wide, budget=10)) == pytest.approx(0.25)
    assert float(seq_mean_token_mean(loss, mask)) == pytest.approx(1.0)


def test_the_config_chooses_each_variant_once():
    from rlvr import config
    from rlvr.algo.variants import POLICY_LOSSES, RATIO_LEVELS
    from rlvr.errors import ConfigError
    from rlvr.training.state import update_spec

    spec = update_spec(config.load(None, ["grpo.ratio_level=sequence", "grpo.policy_loss=cispo",
                                        "grpo.top_entropy_quantile=0.2", "grpo.mask_truncated=true",
                                        "grpo.loss_agg=seq-mean-token-sum-norm",
                                        "rollout.max_new_tokens=32"]))
    loss = spec.loss
    assert loss.log_ratio_fn is RATIO_LEVELS["sequence"] and loss.policy_fn is POLICY_LOSSES["cispo"]
    assert loss.top_entropy_quantile == 0.2 and spec.mask_truncated
    assert loss.agg_fn.keywords == {"budget": 32}
    plain = update_spec(config.load(None))
    assert plain.loss.log_ratio_fn is token_log_ratio
    assert plain.loss.policy_fn is ppo_surrogate and not plain.mask_truncated
    with pytest.raises(ConfigError, match="grpo.top_entropy_quantile"):
        config.load(None, ["grpo.top_entropy_quantile=0"])
    with pytest.raises(ConfigError, match="grpo.dual_clip"):
        config.load(None, ["grpo.policy_loss=cispo", "grpo.dual_clip=3"])


def test_build_batch_marks_completions_cut_at_the_budget():
    from rlvr.models.batch import build_batch
    from rlvr.types import Completion, Group, Problem

    comps = [Completion("", [7, 2], [-1.0] * 2, "stop"), Completion("", [8, 8, 8], [-1.0] * 3, "length")]
    batch = build_batch([Group(Problem(id="p", prompt=""), [1, 5], comps)], torch.tensor([[1.0, -1.0]]), 0)
    assert batch.truncated.tolist() == [False, True]
    assert batch.without_truncated().train_mask().tolist() == [[1, 1, 0], [0, 0, 0]]
    assert batch.rows(torch.tensor([1])).truncated.tolist() == [True]
    assert batch.trimmed().truncated.tolist() == [False, True]


def test_the_update_runs_the_chosen_ratio_level_and_surrogate():
    from rlvr.models.tiny import build_model
    from rlvr.models.batch import build_batch
    from rlvr.training.update import UpdateSpec, update_policy
    from rlvr.types import Completion, Group, Problem

    model, _ = build_model(seed=1, hidden=32, layers=2, heads=4, mlp=64)
    comps = [Completion("", [7, 8, 2], [-1.0] * 3, "stop"), Completion("", [9, 2], [-1.0] * 2, "length")]
    batch = build_batch([Group(Problem(id="p", prompt=""), [1, 5], comps)], torch.tensor([[1.0, -1.0]]), 0)
    seen = []

    def ratio(*args):
        seen.append("sequence")
        return sequence_log_ratio(*args)

    def surrogate(*args):
        seen.append("cispo")
        return cispo_surrogate(*args)

    spec = UpdateSpec(LossSpec(log_ratio_fn=ratio, policy_fn=surrogate), mu=2)
    update_policy(model, torch.optim.SGD(model.parameters(), lr=0.1), batch, spec)
    assert seen == ["sequence", "cispo"] * 2    # both passes
