"""The vLLM worker extension that takes new weights in place (`LLM(worker_extension_cls=...)`).

vLLM mixes this class into its worker; `rlvr_push_weights` runs inside the worker through
`LLM.collective_rpc`. It goes through the worker's own `reload_weights`, because after the first
load the CPU backend repacks linear weights and `model.load_weights` no longer works there. The
weights arrive as safetensors bytes: across a process boundary `collective_rpc` turns tensors in
its arguments into lists. Not named `update_weights`: vLLM's worker already has one.
"""

from __future__ import annotations

from typing import Callable


class WeightSync:
    reload_weights: Callable[..., None]    # vLLM's worker, which this class extends, defines it

    def rlvr_push_weights(self, blob: bytes) -> int:
        """Load the (checkpoint-format) state dict in `blob`; returns the number of tensors."""
        from safetensors.torch import load

        state = load(blob)
        self.reload_weights(weights_iterator=iter(state.items()), is_checkpoint_format=True)
        return len(state)
