"""The loss variants against TRL's own loss on identical batches (skipped where TRL is absent).

Each case builds the same tiny model twice, gives TRL's `GRPOTrainer._compute_loss` and rlvr the
same prompts, completions, advantages (and old log-probs where the ratio matters), and compares
the loss and every parameter's gradient: Dr. GRPO (`dr_grpo`: the generation budget, not the
padded length), CISPO, GSPO (sequence-level ratio with TRL's `grpo` aggregation), the top-entropy
token share, and truncated completions masked out of the loss.
"""

import copy
import dataclasses
import functools

import pytest
import torch

pytest.importorskip("trl")

from rlvr.algo.kl import kl_k3  # noqa: E402
from rlvr.algo.losses import LossSpec, grpo_loss, seq_mean_token_mean, seq_mean_token_sum_norm, token_mean  # noqa: E402
from rlvr.algo.variants import cispo_surrogate, high_entropy_mask, sequence_log_ratio  # noqa: E402
from rlvr.models.tiny import build_model  # noqa: E402
from rlvr.models.batch import Batch  # noqa: E402
from rlvr.training.update import UpdateSpec, _logp_and_entropy, update_policy  # noqa: E402

torch.set_num_threads(1)
BUDGET = 8


def _trainer(model, tokenizer, tmp_path, **options):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    cfg = GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=6, num_generations=3,
                     beta=0.0, num_iterations=1, use_cpu=True, report_to="none",
                     max_completion_length=BUDGET, bf16=False, **options)
    data = Dataset.from_list([{"prompt": "1+1="}] * 6)
    trainer = GRPOTrainer(model=model, reward_funcs=lambda completions, **_: [0.0] * len(completions),
                          args=cfg, train_dataset=data, processing_class=tokenizer)
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1
    return trainer


def _batch(truncated=None):
    g = torch.Generator().manual_seed(3)
    prompt_ids = torch.randint(3, 15, (6, 4), generator=g)
    prompt_mask = torch.ones(6, 4, dtype=torch.long)
    prompt_mask[0, :2] = 0
    prompt_ids[0, :2] = 0
    completion_ids = torch.randint(3, 15, (6, 5), generator=g)
    lengths = torch.tensor([5, 3, 1, 4, 5, 2])
    completion_mask = (torch.arange(5)[None] < lengths[:, None]).long()
    adv = torch.tensor([1.2, -0.6, -0.6, 0.9, -0.3, -0.6])
    old = torch.randn(6, 5, generator=g) * 0.3 - 2.0      # a stale policy: ratios far from 1
    return Batch(prompt_ids, prompt_mask, completion_ids * completion_mask, completion_mask, adv,
                 torch.zeros(6, 5), truncated=truncated), old


def _trl_side(model, tokenizer, tmp_path, batch, old=None, mask=None, **options):
    trl_model = copy.deepcopy(model)
    trainer = _trainer(trl_model, tokenizer, tmp_path, **options)
    mask = batch.completion_mask if mask is None else mask
    inputs = {"prompt_ids": batch.prompt_ids, "prompt_mask": batch.prompt_mask,
              "completion_ids": batch.completion_ids, "completion_mask": mask,
              "advantages": batch.advantages, "num_items_in_batch": mask.sum()}
    if old is not None:
        inputs["old_per_token_logps"] = old
    loss = trainer._compute_loss(trl_model, inputs)
    loss.backward()
    return float(loss), [p.grad for p in trl_model.parameters()]


def _spec(agg_fn, top_entropy_quantile=1.0, **kw):
    loss = LossSpec(kl_fn=kl_k3, agg_fn=agg_fn, eps_low=0.2, eps_high=0.2, dual_clip=0.0, beta=0.0,
                    entropy_coef=0.0, top_entropy_quantile=top_entropy_quantile)
    return UpdateSpec(loss, temperature=1.0, grad_clip=0.0, **kw)


def _rlvr_update(model, batch, spec):
    seen = []
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    opt.register_step_pre_hook(lambda *_: seen.append([p.grad for p in model.parameters()]))
    stats = update_policy(model, opt, batch, spec)
    return stats["loss"], seen[0]


def _rlvr_loss(model, batch, old, mask, **kw):
    logp, entropy = _logp_and_entropy(model, batch, 1.0, False)
    loss, _ = grpo_loss(logp, old, batch.advantages, mask.float(), LossSpec(**kw), entropy=entropy)
    loss.backward()
    return float(loss), [p.grad for p in model.parameters()]


def _same(ours, theirs):
    (loss, grads), (trl_loss, trl_grads) = ours, theirs
    assert loss == pytest.approx(trl_loss, abs=1e-6)
    for g, t in zip(grads, trl_grads):
        torch.testing.assert_close(g, t, atol=1e-6, rtol=1e-4)
    assert any(float(g.abs().max()) > 1e-4 for g in grads)


@pytest.fixture
def tiny():
    return build_model(seed=2, hidden=32, layers=2, heads=4, mlp=64)


def test_dr_grpo_is_trls_dr_grpo(tiny, tmp_path):
    model, tokenizer = tiny
    batch, _ = _batch()      # padded to 5 columns, budget 8: the two normalisers differ
    theirs = _trl_side(model, tokenizer, tmp_path, batch, loss_type="dr_grpo", epsilon=0.2)
    spec = _spec(functools.partial(seq_mean_token_sum_norm, budget=BUDGET))
    _same(_rlvr_update(model, batch, spec), theirs)


def test_cispo_is_trls_cispo(tiny, tmp_path):
    model, tokenizer = tiny
    batch, old = _batch()
    # TRL's epsilon_high is the cap itself; rlvr's cap is 1 + eps_high
    theirs = _trl_side(model, tokenizer, tmp_path, batch, old, loss_type="cispo", epsilon_high=3.0)
    ours = _rlvr_loss(model, batch, old, batch.completion_mask, eps_low=0.2, eps_high=2.0,
                      agg_fn=token_mean, policy_fn=cispo_surrogate)
    _same(ours, theirs)


def test_gspo_is_trls_sequence_level_grpo(tiny, tmp_path):
    model, tokenizer = tiny
    batch, old = _batch()
    old = old * 0.02 - 0.2   # sequence ratios near the 3e-4 / 4e-4 clip range, some inside it
    theirs = _trl_side(model, tokenizer, tmp_path, batch, old, loss_type="grpo", epsilon=3e-4,
                       epsilon_high=4e-4, importance_sampling_level="sequence")
    ours = _rlvr_loss(model, batch, old, batch.completion_mask, eps_low=3e-4, eps_high=4e-4,
                      agg_fn=seq_mean_token_mean, log_ratio_fn=sequence_log_ratio)
    _same(ours, theirs)


def test_top_entropy_quantile_is_trls(tiny, tmp_path):
    model, tokenizer = tiny
    model2 = copy.deepcopy(model)
    batch, old = _batch()
    theirs = _trl_side(model, tokenizer, tmp_path, batch, old, loss_type="dapo", epsilon=0.2,
                       top_entropy_quantile=0.3)
    logp, entropy = _logp_and_entropy(model, batch, 1.0, False)
    keep = high_entropy_mask(entropy, batch.completion_mask, 0.3)
    assert 0 < int(keep.sum()) < int(batch.completion_mask.sum())
    ours = _rlvr_loss(model, batch, old, batch.completion_mask, eps_low=0.2, eps_high=0.2,
                      agg_fn=token_mean, top_entropy_quantile=0.3)
    _same(ours, theirs)
    # and the update applies it: the whole step (ratio 1) against TRL's without old log-probs,
    # with a zero-advantage group whose tokens still move the threshold
    batch = dataclasses.replace(batch, advantages=torch.tensor([1.2, -0.6, -0.6, 0.0, 0.0, 0.0]))
    theirs = _trl_side(model2, tokenizer, tmp_path, batch, loss_type="dapo", epsilon=0.2,
                       top_entropy_quantile=0.5)
    _same(_rlvr_update(model2, batch, _spec(token_mean, top_entropy_quantile=0.5)), theirs)


def test_mask_truncated_is_trls(tiny, tmp_path):
    model, tokenizer = tiny
    truncated = torch.tensor([True, False, False, False, True, False])
    batch, _ = _batch(truncated)
    # TRL zeroes the truncated rows of completion_mask, and counts tokens without them
    trl_mask = batch.completion_mask * (~truncated).unsqueeze(1).long()
    theirs = _trl_side(model, tokenizer, tmp_path, batch, mask=trl_mask, loss_type="dapo", epsilon=0.2)
    _same(_rlvr_update(model, batch, _spec(token_mean, mask_truncated=True)), theirs)
