"""Data-parallel training under `torchrun`: DDP or FSDP2, gloo on CPU, NCCL on GPUs.

`train()` stays one SPMD program (see docs/design/scaleout.md): every rank runs the same loop on
the same groups, sampler, advantages and doctor state; only `update_policy` shards rows, through
the `DataParallel` object built here. Generation is sharded too (the rank wrappers of
`rlvr.rollout.ranks`, which see `DataParallel` as their `Ranks`: each rank samples its share of the
problems, then every rank gathers all groups in problem order), so control stays replicated while
the heavy work is split.

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
