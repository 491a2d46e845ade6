"""Micro-batches by a token budget add up to the minibatch's gradient; `run.device` is validated."""

import copy

import pytest
import torch

from rlvr import config
from rlvr.algo.kl import kl_k3
from rlvr.algo.losses import LossSpec, token_mean
from rlvr.errors import ConfigError
from rlvr.models.tiny import build_model
from rlvr.training.setup import build_device
from rlvr.models.batch import build_batch
from rlvr.training.update import Compute, UpdateSpec, update_policy
from rlvr.types import Completion, Group, Problem

torch.set_num_threads(1)
SPEC = UpdateSpec(LossSpec(kl_fn=kl_k3, agg_fn=token_mean, eps_low=0.2, eps_high=0.2, dual_clip=0.0,
                           beta=0.04, entropy_coef=0.01), temperature=1.0, grad_clip=0.0)


def _batch():
    def group(prompt, completions):
        return Group(Problem(id=str(prompt), prompt=""), prompt,
                     [Completion("", t, [-1.0] * len(t), "stop") for t in completions])
    groups = [group([1, 5, 6], [[7, 8, 2], [9, 2], [7, 7, 7, 2]]), group([1, 9], [[5, 2], [6, 6, 2], [2]])]
    return build_batch(groups, torch.tensor([[1.0, 0.0, -1.0], [0.5, -0.5, 0.0]]), pad_id=0)


def _sgd(model, batch, compute):
    model = copy.deepcopy(model)
    before = [p.detach().clone() for p in model.parameters()]
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    stats = update_policy(model, opt, batch, SPEC, reference=copy.deepcopy(model),
                          compute=compute)
    return [p.detach() - b for p, b in zip(model.parameters(), before)], stats


def test_micro_batched_update_equals_one_backward():
    model, _ = build_model(seed=1, hidden=32, layers=2, heads=4, mlp=64)
    whole, s1 = _sgd(model, _batch(), Compute())
    split, s2 = _sgd(model, _batch(), Compute(micro_batch_tokens=14))
    for a, b in zip(whole, split):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-4)
    assert any(float(d.abs().max()) > 0 for d in whole)
    assert s1["loss"] == pytest.approx(s2["loss"], rel=1e-5, abs=1e-7)


@pytest.mark.parametrize("spec", ["graphics", "cuda:x", "CPU"])
def test_bad_device_names_the_key(spec):
    with pytest.raises(ConfigError, match="run.device"):
        config.load(None, [f"run.device={spec}"])


def test_cpu_device_is_fp32_and_missing_gpu_is_a_clear_error():
    dev = build_device(config.load(None, ["run.device=cpu"]))
    assert not dev.is_cuda and not dev.bf16 and dev.peak_memory_gb() is None
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="run.device.*CUDA is not available"):
            build_device(config.load(None, ["run.device=cuda"]))
