"""build_batch and update_policy: layout, the zero-advantage skip, μ = 1 log-prob reuse."""

import copy
import dataclasses

import pytest
import torch

from rlvr.algo.kl import kl_k3
from rlvr.algo.losses import LossSpec, token_mean
from rlvr.models.tiny import build_model
from rlvr.types import Completion, Group, Problem
from rlvr.models.batch import build_batch
from rlvr.training.update import UpdateSpec, update_policy

torch.set_num_threads(1)

SPEC = UpdateSpec(LossSpec(kl_fn=kl_k3, agg_fn=token_mean, eps_low=0.2, eps_high=0.2, dual_clip=0.0,
                           beta=0.0, entropy_coef=0.0), temperature=1.0, grad_clip=0.0)


def _update(model, opt, batch, generator=None, **spec):
    """update_policy with SPEC, its μ / minibatch / skip settings replaced by `spec`."""
    return update_policy(model, opt, batch, dataclasses.replace(SPEC, **spec), generator=generator)


def _group(prompt, completions):
    comps = [Completion("", toks, [-1.0] * len(toks), "stop") for toks in completions]
    return Group(Problem(id=str(prompt), prompt=""), prompt, comps)


def test_build_batch_pads_prompts_left_and_completions_right():
    groups = [_group([1, 5], [[7, 2], [8]]), _group([1, 6, 9], [[9, 9, 2], []])]
    batch = build_batch(groups, torch.tensor([[0.5, -0.5], [1.0, 0.0]]), pad_id=0)
    assert batch.prompt_ids.tolist() == [[0, 1, 5], [0, 1, 5], [1, 6, 9], [1, 6, 9]]
    assert batch.prompt_mask.tolist() == [[0, 1, 1], [0, 1, 1], [1, 1, 1], [1, 1, 1]]
    assert batch.completion_ids.tolist() == [[7, 2, 0], [8, 0, 0], [9, 9, 2], [0, 0, 0]]
    assert batch.completion_mask.tolist() == [[1, 1, 0], [1, 0, 0], [1, 1, 1], [0, 0, 0]]
    assert batch.advantages.tolist() == [0.5, -0.5, 1.0, 0.0]
    assert batch.sampling_logp.tolist() == [[-1, -1, 0], [-1, 0, 0], [-1, -1, -1], [0, 0, 0]]


@pytest.fixture(scope="module")
def tiny():
    model, _ = build_model(seed=1, hidden=32, layers=2, heads=4, mlp=64)
    return model


def _batch(advantages):
    groups = [_group([1, 5, 6], [[7, 8, 2], [9, 2], [7, 7, 7, 2]]),
              _group([1, 9], [[5, 2], [6, 6, 2], [2]])]
    return build_batch(groups, torch.tensor(advantages), pad_id=0)


def _sgd_delta(model, batch, **kw):
    """Parameter change under SGD(lr=1) without clipping, i.e. minus the gradient."""
    model = copy.deepcopy(model)
    before = [p.detach().clone() for p in model.parameters()]
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    stats = _update(model, opt, batch, **kw)
    return [p.detach() - b for p, b in zip(model.parameters(), before)], stats


def test_zero_advantage_skip_gives_the_full_batch_gradient(tiny):
    batch = _batch([[1.0, 0.0, -1.0], [0.0, 0.0, 0.0]])   # 4 of 6 sequences contribute nothing
    skipped, s1 = _sgd_delta(tiny, batch, skip_zero_advantage=True)
    full, s2 = _sgd_delta(tiny, batch, skip_zero_advantage=False)
    assert s1["active_fraction"] == pytest.approx(2 / 6) and s2["active_fraction"] == 1.0
    for a, b in zip(skipped, full):
        torch.testing.assert_close(a, b, atol=1e-7, rtol=1e-5)
    assert any(float(d.abs().max()) > 0 for d in skipped)


def test_all_zero_advantages_take_no_optimizer_step(tiny):
    deltas, stats = _sgd_delta(tiny, _batch([[0.0] * 3, [0.0] * 3]))
    assert stats["optimizer_steps"] == 0.0
    assert all(float(d.abs().max()) == 0.0 for d in deltas)


def test_single_pass_reuses_current_logprobs_as_old(tiny):
    _, stats = _sgd_delta(tiny, _batch([[1.0, 0.0, -1.0], [0.5, -0.5, 0.0]]))
    assert stats["ratio/mean"] == 1.0 and stats["ratio/min"] == 1.0 and stats["ratio/max"] == 1.0
    assert stats["clip_ratio/region_mean"] == 0.0 and stats["optimizer_steps"] == 1.0


def test_fused_training_forward_matches_transformers_logits_and_gradients(tiny):
    from rlvr.models import fused_llama
    from rlvr.models.policy import completion_logits

    batch = _batch([[1.0, 0.0, -1.0], [0.5, -0.5, 0.0]])
    tensors = (batch.prompt_ids, batch.prompt_mask, batch.completion_ids, batch.completion_mask)
    grads = []
    for fn in (fused_llama.completion_logits, completion_logits):
        model = copy.deepcopy(tiny)
        out = fn(model, *tensors)
        (out * batch.completion_mask[..., None]).pow(2).sum().backward()
        grads.append((out.detach(), [p.grad for p in model.parameters()]))
    real = batch.completion_mask.bool()   # padding positions may differ: nothing reads them
    torch.testing.assert_close(grads[0][0][real], grads[1][0][real], atol=1e-5, rtol=1e-5)
    for a, b in zip(grads[0][1], grads[1][1]):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)


def test_trimming_padding_columns_leaves_the_update_unchanged(tiny):
    batch = _batch([[1.0, 0.0, -1.0], [0.5, -0.5, 0.0]])
    wide = copy.deepcopy(batch)
    pad = torch.zeros(len(batch), 3, dtype=torch.long)
    wide.prompt_ids, wide.prompt_mask = torch.cat([pad, wide.prompt_ids], 1), torch.cat([pad, wide.prompt_mask], 1)
    wide.completion_ids, wide.completion_mask = torch.cat([wide.completion_ids, pad], 1), torch.cat([wide.completion_mask, pad], 1)
    wide.sampling_logp = torch.cat([wide.sampling_logp, pad.float()], 1)
    assert wide.trimmed().completion_ids.tolist() == batch.completion_ids.tolist()
    assert wide.trimmed().prompt_ids.tolist() == batch.prompt_ids.tolist()
    for a, b in zip(_sgd_delta(tiny, wide)[0], _sgd_delta(tiny, batch)[0]):
        torch.testing.assert_close(a, b, atol=1e-7, rtol=1e-5)


def _recorded_gradients(model, batch, **kw):
    """The gradient of every optimizer step update_policy takes, with weights that never move
    (SGD at lr 0), so that every pass sees the same policy and nothing is clipped (ratio 1)."""
    model = copy.deepcopy(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    seen = []
    opt.register_step_pre_hook(lambda *_: seen.append(
        [torch.zeros_like(p) if p.grad is None else p.grad.clone() for p in model.parameters()]))
    stats = _update(model, opt, batch, **kw)
    return seen, stats


def test_each_minibatch_step_is_the_full_batch_gradient_on_average(tiny):
    # Each minibatch is one optimizer step normalised by its share of the batch's token count
    # (TRL's dapo does the same per accumulation window): over one pass the minibatch gradients
    # average to the full-batch gradient, whatever the pass count μ and the row order.
    batch = _batch([[1.0, 0.0, -1.0], [0.5, -0.5, 0.7]])
    (full,), _ = _recorded_gradients(tiny, batch)
    steps, stats = _recorded_gradients(tiny, batch, mu=2, minibatch_size=2,
                                       generator=torch.Generator().manual_seed(0))
    assert stats["optimizer_steps"] == 6.0 and len(steps) == 6   # 5 active rows: 3 minibatches × μ
    assert stats["clip_ratio/region_mean"] == 0.0
    for one_pass in (steps[:3], steps[3:]):
        mean = [sum(g) / 3 for g in zip(*one_pass)]
        for a, b in zip(mean, full):
            torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-4)
    assert any(float((a - b).abs().max()) > 1e-4 for a, b in zip(steps[0], full))   # a real split
