"""One rlvr update against TRL's own loss on the same batch (skipped where TRL is not installed).

`bench/grpo_vs_trl.py` compares the two trainers end to end; this pins the part that must be
identical: with token-mean aggregation (TRL's `dapo`), no KL, μ = 1, rlvr's `update_policy`
(which skips zero-advantage rows but still counts their tokens) gives the same loss and the same
gradient as `GRPOTrainer._compute_loss` on identical prompts, completions and advantages.
"""

import copy

import pytest
import torch

pytest.importorskip("trl")

from rlvr.algo.kl import kl_k3  # noqa: E402
from rlvr.algo.losses import LossSpec, token_mean  # noqa: E402
from rlvr.models.tiny import build_model  # noqa: E402
from rlvr.models.batch import Batch  # noqa: E402
from rlvr.training.update import UpdateSpec, update_policy  # noqa: E402

torch.set_num_threads(1)


def _trl_trainer(model, tokenizer, tmp_path):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    cfg = GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=6, num_generations=3,
                     beta=0.0, epsilon=0.2, loss_type="dapo", num_iterations=1, use_cpu=True,
                     report_to="none", max_completion_length=8, bf16=False)
    data = Dataset.from_list([{"prompt": "1+1="}] * 6)
    trainer = GRPOTrainer(model=model, reward_funcs=lambda completions, **_: [0.0] * len(completions),
                          args=cfg, train_dataset=data, processing_class=tokenizer)
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1
    return trainer


def _batch():
    g = torch.Generator().manual_seed(3)
    prompt_ids = torch.randint(3, 15, (6, 4), generator=g)
    prompt_mask = torch.ones(6, 4, dtype=torch.long)
    prompt_mask[0, :2] = 0                          # left padding, as both trainers lay it out
    prompt_ids[0, :2] = 0
    completion_ids = torch.randint(3, 15, (6, 5), generator=g)
    lengths = torch.tensor([5, 3, 1, 4, 5, 2])
    completion_mask = (torch.arange(5)[None] < lengths[:, None]).long()
    completion_ids = completion_ids * completion_mask
    advantages = torch.tensor([1.2, -0.6, -0.6, 0.0, 0.0, 0.0])   # one group with signal, one without
    return prompt_ids, prompt_mask, completion_ids, completion_mask, advantages


def test_rlvr_update_has_trls_dapo_loss_and_gradient(tmp_path):
    model, tokenizer = build_model(seed=2, hidden=32, layers=2, heads=4, mlp=64)
    prompt_ids, prompt_mask, completion_ids, completion_mask, adv = _batch()
    trl_model = copy.deepcopy(model)
    trainer = _trl_trainer(trl_model, tokenizer, tmp_path)
    trl_loss = trainer._compute_loss(trl_model, {
        "prompt_ids": prompt_ids, "prompt_mask": prompt_mask, "completion_ids": completion_ids,
        "completion_mask": completion_mask, "advantages": adv,
        "num_items_in_batch": completion_mask.sum()})
    trl_loss.backward()

    spec = UpdateSpec(LossSpec(kl_fn=kl_k3, agg_fn=token_mean, eps_low=0.2, eps_high=0.2, dual_clip=0.0,
                               beta=0.0, entropy_coef=0.0), temperature=1.0, grad_clip=0.0)
    seen = []
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    opt.register_step_pre_hook(lambda *_: seen.append([p.grad for p in model.parameters()]))
    batch = Batch(prompt_ids, prompt_mask, completion_ids, completion_mask, adv, torch.zeros(6, 5))
    stats = update_policy(model, opt, batch, spec)

    assert stats["active_fraction"] == pytest.approx(0.5)
    assert stats["loss"] == pytest.approx(float(trl_loss), abs=1e-6)
    (grads,) = seen
    for (name, p), g in zip(trl_model.named_parameters(), grads):
        torch.testing.assert_close(g, p.grad, atol=1e-6, rtol=1e-4, msg=lambda m: f"{name}: {m}")
    assert any(float(g.abs().max()) > 1e-4 for g in grads)
