"""Data-parallel training under `torchrun`: DDP or FSDP2, gloo on CPU, NCCL on GPUs.

`train()` stays one SPMD program (see docs/design/scaleout.md): every rank runs the same loop on
the same groups, sampler, advantages and doctor state; only `update_policy` shards rows, through
the `DataParallel` object built here. Generation is sharded too (`ShardedEngine`: each rank samples
its share of the problems, then every rank gathers all groups in problem order), so control stays
replicated while the heavy work is split.

Guaranteed:
- Every rank enters every collective in the same order: decisions (skip a step, stop on NaN) are
  taken from all-reduced values, never from a rank's own.
- The loss of a minibatch is normalised by the GLOBAL token (or sequence) count of that minibatch
  on every rank and multiplied by the world size, so the averaged gradient equals the one-process
  gradient on the whole minibatch, also when ranks hold different token counts.
- Rank 0 writes every file; checkpoints hold full (unsharded) state dicts gathered with
  `torch.distributed.checkpoint.state_dict`, so a checkpoint is an ordinary Hugging Face checkpoint.
Not guaranteed: the same samples as a one-process run (each rank's share is sampled with a seed
derived from (seed, rank), so samples depend on the world size); resume on another world size
(untested, though nothing in the files depends on it).
"""

from __future__ import annotations

import os
from typing import Any, Sequence, cast

import torch
import torch.distributed as dist

from rlvr.models.device import seed_for
from rlvr.rollout.base import stamp

MODES = ("ddp", "fsdp2")


def world_from_env() -> tuple[int, int]:
    """(rank, world size) as set by torchrun; (0, 1) outside it."""
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


def is_main() -> bool:
    return world_from_env()[0] == 0


class DataParallel:
    """The process group and the wrapped training module of one rank. It is set up before the
    run's `Device` and hands it `local_rank`; its own collectives run on the device
    `Device.resolve` gives that rank (the rank's GPU under NCCL, the CPU under gloo)."""

    def __init__(self, mode: str, backend: str | None = None):
        from rlvr.models.device import Device

        if mode not in MODES:
            raise ValueError(f"data-parallel mode {mode!r}; known: {', '.join(MODES)}")
        self.mode = mode
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        if not dist.is_initialized():
            backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
            if backend == "nccl":   # NCCL binds each rank to the current device when it starts
                torch.cuda.set_device(self.local_rank)
            dist.init_process_group(backend)
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        spec = "cuda" if dist.get_backend() == "nccl" else "cpu"
        self.device = Device.resolve(spec, local_rank=self.local_rank).torch

    # ---- the model ------------------------------------------------------------------------------

    def wrap(self, model: torch.nn.Module) -> torch.nn.Module:
        """DDP around the model, or FSDP2 `fully_shard` on each decoder layer and then the model
        (in place: the returned module is `model` itself, its parameters now sharded DTensors)."""
        if self.mode == "ddp":
            from torch.nn.parallel import DistributedDataParallel

            ids = [self.device.index] if self.device.type == "cuda" else None
            return DistributedDataParallel(model, device_ids=ids)
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        mesh = init_device_mesh(self.device.type, (self.world,))
        for layer in decoder_layers(model):
            fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
        return model

    def full_model_state(self, model: torch.nn.Module) -> dict[str, torch.Tensor]:
        """The unsharded state dict in CPU memory on rank 0, for writing checkpoints (a collective
        under FSDP2: every rank calls it; with `cpu_offload` ranks >= 1 get an empty dict)."""
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        options = StateDictOptions(full_state_dict=True, cpu_offload=True)
        return cast("dict[str, torch.Tensor]", get_model_state_dict(model, options=options))

    def full_optim_state(self, model: torch.nn.Module, optimizer) -> dict[str, Any]:
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

        if self.mode == "ddp":
            return optimizer.state_dict()
        return get_optimizer_state_dict(model, optimizer,
                                        options=StateDictOptions(full_state_dict=True, cpu_offload=True))

    def load_full_state(self, model, optimizer, model_state: dict, optim_state: dict | None) -> None:
        """Load full state dicts written by `full_*_state` into the (sharded) model and optimizer."""
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

        opts = StateDictOptions(full_state_dict=True, strict=False)
        set_model_state_dict(model, model_state, options=opts)
        if optim_state is not None:
            self.load_full_optim_state(model, optimizer, optim_state)

    def load_full_optim_state(self, model, optimizer, optim_state: dict) -> None:
        """Load an optimizer state written by `full_optim_state` (after the model's weights)."""
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

        if self.mode == "ddp":
            optimizer.load_state_dict(optim_state)
        else:
            set_optimizer_state_dict(model, optimizer, optim_state,
                                     options=StateDictOptions(full_state_dict=True, strict=False))

    # ---- the collectives update_policy and the loop use -----------------------------------------

    def all_mean(self, values: dict[str, float]) -> dict[str, float]:
        """Mean over ranks of each value, in one all-reduce (same key order on every rank)."""
        keys = sorted(values)
        t = torch.tensor([values[k] for k in keys], dtype=torch.float64, device=self.device)
        dist.all_reduce(t)
        return {k: float(v) / self.world for k, v in zip(keys, t.tolist())}

    def all_gather(self, obj: Any) -> list[Any]:
        out: list[Any] = [None] * self.world
        dist.all_gather_object(out, obj)
        return out

    def barrier(self) -> None:
        dist.barrier()

    def close(self) -> None:
        if dist.is_initialized():
            # Every rank reaches the end before the group goes: a rank tearing the group down
            # while its peer still finishes its last collective can hang (pytorch#75097).
            dist.barrier()
            dist.destroy_process_group()


def decoder_layers(model: torch.nn.Module) -> Sequence[torch.nn.Module]:
    """The repeated blocks FSDP2 shards one by one (`model.model.layers` in HF decoders)."""
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    if layers is None:
        raise ValueError(f"FSDP2: cannot find decoder layers in {type(model).__name__} "
                         "(expected model.model.layers)")
    return list(layers)


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    return getattr(model, "module", model)


class ShardedEngine:
    """A `RolloutEngine` that samples this rank's share of the problems and gathers every rank's
    groups in problem order (rank r holds problems r, r + W, ...), so all ranks return the same
    list. `load_weights` goes to the inner engine; under FSDP2 the inner engine holds its own full
    copy of the weights (`FullCopyEngine`)."""

    def __init__(self, inner, dp: DataParallel):
        self.inner, self.dp = inner, dp
        self.pad_id, self.vocab_limit = inner.pad_id, inner.vocab_limit
        self.version = 0

    @property
    def model(self):
        return self.inner.model

    @property
    def sync_metrics(self) -> dict[str, float]:
        return self.inner.sync_metrics

    def generate(self, problems, n, params, seed):
        mine = list(problems)[self.dp.rank::self.dp.world]
        local = self.inner.generate(mine, n, params, seed_for(seed, f"rank{self.dp.rank}")) if mine else []
        shards = self.dp.all_gather(local)
        out = [None] * len(problems)
        for r, groups in enumerate(shards):
            out[r::self.dp.world] = groups
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

    def __init__(self, make_engine, sharded_model, dp: DataParallel, copy_model):
        self.dp, self.copy = dp, copy_model
        load_full_copy(copy_model, every_rank_state(sharded_model))
        self.inner = make_engine(copy_model)
        self.pad_id, self.vocab_limit = self.inner.pad_id, self.inner.vocab_limit

    @property
    def version(self) -> int:
        return self.inner.version

    @property
    def model(self):
        return self.copy

    @property
    def sync_metrics(self) -> dict[str, float]:
        return self.inner.sync_metrics

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
    and broadcasts the groups, so every rank returns the same list and the first step's groups are
    the one-process run's. `load_weights` gathers the full weights (under FSDP2 every rank takes
    part, into rank 0's unsharded copy `copy_model`), rank 0 pushes them, and the broadcast of
    its sync metrics is the barrier: no rank samples or trains before the push is done."""

    def __init__(self, make_engine, policy, dp: DataParallel, prompts, copy_model=None):
        self.dp, self.copy = dp, copy_model
        self.pad_id, self.vocab_limit = prompts.pad_id, prompts.vocab_limit
        self.prompts, self.model = prompts, None
        self.sync_metrics: dict[str, float] = {}
        self.version = 0
        if copy_model is not None:
            load_full_copy(copy_model, every_rank_state(policy))
        self.inner = make_engine(copy_model if copy_model is not None else policy) if dp.rank == 0 else None
        dp.barrier()

    def generate(self, problems, n, params, seed):
        box = [self.inner.generate(problems, n, params, seed) if self.inner is not None else None]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def load_weights(self, policy, version: int = 0) -> None:
        self.version = version
        if self.copy is not None:
            load_full_copy(self.copy, every_rank_state(policy))
            policy = self.copy
        if self.inner is not None:
            self.inner.load_weights(unwrap(policy), version)
        box: list[Any] = [self.inner.sync_metrics if self.inner is not None else None]
        dist.broadcast_object_list(box, src=0)
        self.sync_metrics = dict(box[0])

    def close(self) -> None:
        if self.inner is not None:
            self.inner.close()


def every_rank_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The unsharded state dict of an FSDP2 model on every rank (a collective). Not
    `full_model_state`: with `cpu_offload` that returns the state on rank 0 only."""
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
