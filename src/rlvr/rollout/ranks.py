"""Engines under `torchrun`: wrappers that make one engine per rank behave as one engine for all.

Every rank calls the same methods with the same arguments and gets the same groups back, so
control state stays replicated (docs/design/scaleout.md). The wrappers need of the launch only
`Ranks` (this rank, the world size, an all-gather of Python objects); `DataParallel` in
`rlvr.training.distributed` is one. Which wrapper an engine gets is its row of the engine table
(`rollout.engines`): `ShardedEngine` (each rank samples its share of the problems; under FSDP2 over
`FullCopyEngine`, an unsharded copy of the policy) or `RankZeroEngine` (rank 0 alone holds the
engine: vLLM servers, one set per job). A wrapper passes the engine's prompt facts (`prompts`: pad
id, vocabulary limit, encoding) on whole.
Not guaranteed: the same samples as a one-process run under `ShardedEngine` (each rank's share is
sampled with a seed derived from (seed, rank)).
"""

from __future__ import annotations

from typing import Any, Callable, Protocol, cast

import torch

from rlvr.models.device import seed_for
from rlvr.rollout.base import Inner, PromptEncoder, stamp


class Ranks(Protocol):
    rank: int       # this process's rank
    world: int      # the number of ranks

    def all_gather(self, obj: Any) -> list[Any]:
        """Every rank's `obj`, in rank order, on every rank (a collective)."""
        ...


class ShardedEngine:
    """A `RolloutEngine` that samples this rank's share of the problems and gathers every rank's
    groups in problem order (rank r holds problems r, r + W, ...), so all ranks return the same
    list. `load_weights` goes to the inner engine; under FSDP2 the inner engine holds its own full
    copy of the weights (`FullCopyEngine`)."""

    model, sync_metrics = Inner(), Inner()

    def __init__(self, inner, ranks: Ranks):
        self.inner, self.ranks = inner, ranks
        self.prompts: PromptEncoder = inner.prompts
        self.version = 0

    def generate(self, problems, n, params, seed):
        rank, world = self.ranks.rank, self.ranks.world
        mine = list(problems)[rank::world]
        local = self.inner.generate(mine, n, params, seed_for(seed, f"rank{rank}")) if mine else []
        shards = self.ranks.all_gather(local)
        out = [None] * len(problems)
        for r, groups in enumerate(shards):
            out[r::world] = groups
        stamp(out, self.version, seed)
        return out

    def load_weights(self, policy, version: int = 0) -> None:
        self.version = version
        self.inner.load_weights(policy)

    def close(self) -> None:
        self.inner.close()


class FullCopyEngine:
    """An engine over an unsharded copy of an FSDP2-sharded policy: `load_weights` gathers the
    full state dict on every rank (a collective) and copies all of it into the copy; a key the
    copy has and the gathered state lacks (other than a tied alias) is an error."""

    version, sync_metrics = Inner(), Inner()

    def __init__(self, make_engine: Callable[[Any], Any], sharded_model, copy_model):
        self.copy = copy_model
        load_full_copy(copy_model, every_rank_state(sharded_model))
        self.inner = make_engine(copy_model)
        self.prompts: PromptEncoder = self.inner.prompts
        self.model = copy_model

    def generate(self, problems, n, params, seed):
        return self.inner.generate(problems, n, params, seed)

    def load_weights(self, policy, version: int = 0) -> None:
        load_full_copy(self.copy, every_rank_state(policy))
        self.inner.load_weights(self.copy, version)   # the inner engine shares the copy: a stamp

    def close(self) -> None:
        self.inner.close()


class RankZeroEngine:
    """A `RolloutEngine` whose engine lives on rank 0 only (vLLM servers: one set per job, not one
    per rank). Rank 0 generates every problem with the call's seed, as a one-process run does,
    and every rank takes rank 0's groups from an all-gather, so every rank returns the same list
    and the first step's groups are the one-process run's. `load_weights` gathers the full
    weights (under FSDP2 every rank takes part, into rank 0's unsharded copy `copy_model`), rank 0
    pushes them, and the gather of its sync metrics is the barrier: no rank samples or trains
    before the push is done."""

    def __init__(self, make_engine: Callable[[Any], Any], policy, ranks: Ranks, prompts: PromptEncoder,
                 copy_model=None):
        self.ranks, self.copy, self.prompts = ranks, copy_model, prompts
        self.model = None
        self.sync_metrics: dict[str, float] = {}
        self.version = 0
        if copy_model is not None:
            load_full_copy(copy_model, every_rank_state(policy))
        model = copy_model if copy_model is not None else policy
        self.inner = make_engine(model) if ranks.rank == 0 else None
        ranks.all_gather(None)   # a barrier: the servers are up before any rank goes on

    def _from_rank_zero(self, obj: Any) -> Any:
        return self.ranks.all_gather(obj)[0]

    def generate(self, problems, n, params, seed):
        return self._from_rank_zero(self.inner.generate(problems, n, params, seed)
                                    if self.inner is not None else None)

    def load_weights(self, policy, version: int = 0) -> None:
        self.version = version
        if self.copy is not None:
            load_full_copy(self.copy, every_rank_state(policy))
            policy = self.copy
        if self.inner is not None:
            self.inner.load_weights(getattr(policy, "module", policy), version)   # DDP's inner module
        metrics = self.inner.sync_metrics if self.inner is not None else None
        self.sync_metrics = dict(self._from_rank_zero(metrics))

    def close(self) -> None:
        if self.inner is not None:
            self.inner.close()


def every_rank_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The unsharded state dict of an FSDP2 model on every rank (a collective). Not
    `DataParallel.full_model_state`: with `cpu_offload` that returns the state on rank 0 only."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    options = StateDictOptions(full_state_dict=True)
    return cast("dict[str, torch.Tensor]", get_model_state_dict(model, options=options))


def load_full_copy(copy: torch.nn.Module, state: dict[str, torch.Tensor]) -> None:
    """Copy `state` into `copy` in place; missing or unexpected keys raise, except a key whose
    parameter is tied to one that `state` holds (a tied output layer)."""
    result = copy.load_state_dict(state, strict=False)
    tensors = copy.state_dict()
    loaded = {t.data_ptr() for k, t in tensors.items() if k in state}
    missing = [k for k in result.missing_keys if tensors[k].data_ptr() not in loaded]
    if missing or result.unexpected_keys:
        raise RuntimeError(f"FSDP2 sampling copy: the gathered state lacks {missing[:5]} and has "
                           f"unexpected {list(result.unexpected_keys)[:5]}; the engine would "
                           "sample from stale weights")
