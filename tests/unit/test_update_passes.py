"""The update's no-grad passes (KL reference, old log-probs) run in micro-batches of the update's
plan, and the reference runs in the policy's precision: the KL is zero at step 0 under bf16, and
a non-fused model's chunked head is a bf16 product under autocast, not a float32 GEMM."""

import copy

import torch

from rlvr.algo.kl import kl_k3
from rlvr.algo.losses import token_mean
from rlvr.models.device import Device
from rlvr.models.tiny import build_model
from rlvr.testing.zoo import build as build_zoo
from rlvr.training import gpu_forward
from rlvr.algo.losses import LossSpec
from rlvr.models.batch import Batch
from rlvr.training.update import Compute, UpdateSpec, update_policy

torch.set_num_threads(1)
SPEC = UpdateSpec(LossSpec(kl_fn=kl_k3, agg_fn=token_mean, eps_low=0.2, eps_high=0.2, beta=0.1),
                  skip_zero_advantage=False)
SPEC_MU2 = UpdateSpec(SPEC.loss, mu=2, skip_zero_advantage=False)


def _batch(vocab: int, rows: int = 8, tp: int = 4, tc: int = 6) -> Batch:
    g = torch.Generator().manual_seed(3)
    adv = torch.linspace(-1, 1, rows)
    return Batch(torch.randint(3, vocab, (rows, tp), generator=g), torch.ones(rows, tp, dtype=torch.long),
                 torch.randint(3, vocab, (rows, tc), generator=g), torch.ones(rows, tc, dtype=torch.long),
                 adv, torch.full((rows, tc), -1.0))


def test_reference_and_old_logprob_passes_are_micro_batched():
    """μ = 2 (old log-probs needed) and β > 0 on a model that runs its own forward (Phi-3): no
    no-grad forward sees more rows than the update's micro-batches (before: the whole batch)."""
    model, _ = build_zoo("phi3")
    reference = copy.deepcopy(model)
    rows_seen: dict[str, list[int]] = {"policy": [], "reference": []}
    for name, m in (("policy", model), ("reference", reference)):
        m.register_forward_pre_hook(
            lambda mod, args, kw, name=name: None if torch.is_grad_enabled()
            else rows_seen[name].append(kw["input_ids"].shape[0]), with_kwargs=True)
    batch = _batch(model.config.vocab_size)
    budget = 3 * 10                                          # three rows of 4 + 6 tokens
    stats = update_policy(model, torch.optim.SGD(model.parameters(), lr=0.0), batch, SPEC_MU2,
                          reference=reference,
                          compute=Compute(micro_batch_tokens=budget))
    assert rows_seen["reference"] == [3, 3, 2] and rows_seen["policy"] == [3, 3, 2]
    whole = update_policy(copy.deepcopy(model), torch.optim.SGD(model.parameters(), lr=0.0), batch,
                          SPEC_MU2, reference=reference)
    assert abs(stats["kl"] - whole["kl"]) < 1e-6 and abs(stats["loss"] - whole["loss"]) < 1e-6


def test_kl_is_zero_at_step_zero_in_bf16():
    """The reference (a copy of the policy) in the policy's precision gives the policy's numbers
    (before: a float32 forward against the bf16 policy, KL ~1e-4 at step 0, and a slower pass)."""
    model, _ = build_model(seed=0, hidden=32, layers=2, heads=4, mlp=64)
    stats = update_policy(model, torch.optim.SGD(model.parameters(), lr=0.0), _batch(20), SPEC,
                          reference=copy.deepcopy(model), autocast=True)
    assert stats["kl"] == 0.0


def test_non_fused_chunked_head_is_bf16_under_autocast():
    """Qwen3 (not fused) through its own decoder: the head's inputs are bf16 like the model's own
    head under autocast (before: a float32 residual stream made it an fp32 GEMM)."""
    model, _ = build_zoo("qwen3")
    assert gpu_forward.variant(model) == "decoder"
    ids = torch.randint(3, 20, (2, 5))
    h, head = gpu_forward._plain_hidden(model, ids, torch.ones_like(ids), Device.cpu(), True)
    assert h.dtype == head.dtype == torch.bfloat16
    h, head = gpu_forward._plain_hidden(model, ids, torch.ones_like(ids), Device.cpu(), False)
    assert h.dtype == head.dtype == torch.float32
