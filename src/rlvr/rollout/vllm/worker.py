"""The vLLM worker extension that takes new weights in place (`LLM(worker_extension_cls=...)`).

vLLM mixes this class into its worker; its methods run inside the worker through
`LLM.collective_rpc`. They go through the worker's own `reload_weights`, because after the first
load the CPU backend repacks linear weights and `model.load_weights` no longer works there. The
weights arrive as safetensors bytes (`rlvr_push_weights`: across a process boundary
`collective_rpc` turns tensors in its arguments into lists) or as the path of a safetensors file
(`rlvr_load_file`, the server engine's shared-memory transport), or by NCCL broadcast from the
trainer (`rlvr_nccl_init`, `rlvr_nccl_load`: `vllm_transport.NcclTransport`, unverified, written
for GPUs). Not named `update_weights`:
vLLM's worker already has one.

`state_hash` is the one digest of a state dict, computed by the trainer over what it sends and
by the worker over what it loads (names, dtypes, shapes and bytes), so equal digests mean the
worker loaded exactly the trainer's tensors.
"""

from __future__ import annotations

import hashlib
from typing import Callable, Mapping


def state_hash(state: Mapping) -> str:
    """sha256 over the tensors of `state` in name order: name, dtype, shape and raw bytes."""
    import torch

    digest = hashlib.sha256()
    for name in sorted(state):
        t = state[name].detach().to("cpu").contiguous()
        digest.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        digest.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


class WeightSync:
    reload_weights: Callable[..., None]    # vLLM's worker, which this class extends, defines it
    rlvr_group: object = None              # the NCCL group of `rlvr_nccl_init`

    def rlvr_push_weights(self, blob: bytes) -> int:
        """Load the (checkpoint-format) state dict in `blob`; returns the number of tensors."""
        from safetensors.torch import load

        state = load(blob)
        self.reload_weights(weights_iterator=iter(state.items()), is_checkpoint_format=True)
        return len(state)

    def rlvr_load_file(self, path: str) -> tuple[int, str]:
        """Load the (checkpoint-format) safetensors file at `path`; returns the number of tensors
        and `state_hash` of what was loaded."""
        from safetensors.torch import load_file

        state = load_file(path)
        self.reload_weights(weights_iterator=iter(state.items()), is_checkpoint_format=True)
        return len(state), state_hash(state)

    def rlvr_nccl_init(self, host: str, port: int, rank: int, world: int) -> int:
        """Join the trainer's weight-broadcast group as `rank` (`vllm_transport.NcclTransport`;
        unverified: written for GPUs)."""
        from rlvr.rollout.vllm.transport import join

        self.rlvr_group = join(host, port, rank, world)
        return rank

    def rlvr_nccl_load(self, meta: list) -> tuple[int, str]:
        """Receive the tensors named in `meta` from the trainer's broadcast onto this worker's
        device and load them; returns their count and `state_hash`."""
        from rlvr.rollout.vllm.transport import receive

        state = receive(self.rlvr_group, meta, getattr(self, "device", None))
        self.reload_weights(weights_iterator=iter(state.items()), is_checkpoint_format=True)
        return len(state), state_hash(state)
