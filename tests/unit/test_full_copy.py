"""FSDP2's sampling copy is loaded strictly: a gathered state that lacks a key (as rank 1's did when
the full state existed on rank 0 only) is an error naming the key, not a copy that silently keeps
its old weights; the tied output layer, absent from a state that holds the embedding, is fine."""

import copy

import pytest
import torch

from rlvr.models.tiny import build_model
from rlvr.rollout.ranks import load_full_copy


def _pair():
    policy, _ = build_model(seed=0, hidden=32, layers=2, heads=4, mlp=64)
    sampling = copy.deepcopy(policy)
    with torch.no_grad():
        for p in policy.parameters():
            p.add_(1.0)                   # the trained policy differs from the copy everywhere
    return policy, sampling


def test_full_state_loads_every_weight():
    policy, sampling = _pair()
    state = policy.state_dict()
    tied = [k for k in state if k.startswith("lm_head")]
    load_full_copy(sampling, {k: v for k, v in state.items() if k not in tied})
    for k, v in policy.state_dict().items():
        assert torch.equal(sampling.state_dict()[k], v), k


@pytest.mark.parametrize("drop", ["model.layers.1.mlp.up_proj.weight", "all"])
def test_a_missing_key_is_an_error(drop):
    policy, sampling = _pair()
    state = policy.state_dict()
    state = {} if drop == "all" else {k: v for k, v in state.items() if k != drop}
    with pytest.raises(RuntimeError, match="stale weights") as err:
        load_full_copy(sampling, state)
    assert "model.layers.1.mlp.up_proj.weight" in str(err.value) or drop == "all"


def test_an_unexpected_key_is_an_error():
    policy, sampling = _pair()
    state = {**policy.state_dict(), "model.layers.9.extra.weight": torch.zeros(2)}
    with pytest.raises(RuntimeError, match="unexpected"):
        load_full_copy(sampling, state)
