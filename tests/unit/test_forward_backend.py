"""The training forward's backend is chosen from what the model is: fused for a plain Llama on a
CPU, the model's own forward for a wrapped one, also after a no-grad forward has left an FSDP2
root's parameters unsharded (a test of the parameters' type would pick the fused path there, and
a μ > 1 update would crash on mixed DTensor/Tensor weights)."""

import copy

import pytest
import torch

from rlvr.models.tiny import build_model
from rlvr.training import forward
from rlvr.models.batch import Batch
from rlvr.training.update import Compute, UpdateSpec, update_policy

torch.set_num_threads(1)


def _batch(vocab: int) -> Batch:
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, vocab, (4, 5), generator=g)
    mask = torch.ones(4, 5, dtype=torch.long)
    return Batch(ids, mask, torch.randint(3, vocab, (4, 6), generator=g), torch.ones(4, 6, dtype=torch.long),
                 torch.tensor([1.0, -1.0, 0.5, -0.5]), torch.zeros(4, 6))


def test_plain_llama_on_cpu_is_fused_and_a_ddp_like_wrapper_is_not():
    model, _ = build_model(seed=0, hidden=32, layers=2, heads=4, mlp=64)
    assert forward.backend_name(model, Compute()) == "fused"
    wrapper = torch.nn.Module()
    wrapper.module = model
    assert forward.backend_name(wrapper, Compute()) == "model"


def test_fsdp2_model_keeps_its_own_forward_after_a_no_grad_forward(one_rank_group):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    model, _ = build_model(seed=0, hidden=32, layers=2, heads=4, mlp=64)
    plain = copy.deepcopy(model)
    mesh = init_device_mesh("cpu", (1,))
    for layer in model.model.layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    batch = _batch(model.config.vocab_size)
    with torch.no_grad():
        forward.choose(model, Compute(), False)(batch, 1.0)
    assert forward.backend_name(model, Compute()) == "model"
    stats = [update_policy(m, torch.optim.SGD(m.parameters(), lr=0.0), batch,
                           UpdateSpec(mu=2, skip_zero_advantage=False)) for m in (model, plain)]
    assert stats[0]["optimizer_steps"] == stats[1]["optimizer_steps"] == 2.0
    assert stats[0]["loss"] == pytest.approx(stats[1]["loss"], rel=1e-5, abs=1e-7)
