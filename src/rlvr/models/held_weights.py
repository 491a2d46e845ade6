"""A model's fused matrices cast once for all the micro-batches of one minibatch (`HeldWeights`).

`fused_llama.Weights(model, dtype, held)` takes its concatenated, cast matrices from a `HeldWeights`
instead of making them per call; `release` gives the accumulated gradients to the parameters.
Used by the fused CPU training forward (`backends.FusedBackend.minibatch`).
"""

from __future__ import annotations

import torch


class _Held(torch.autograd.Function):
    """The held copy of a fused matrix on the graph of one forward: its gradient (one forward's,
    in the matrix's dtype, as autograd sums it) is added in float32 to the held accumulator, and
    nothing flows further (the parameters get theirs when the minibatch ends)."""

    @staticmethod
    def forward(ctx, fused, entry):
        ctx.entry = entry
        return fused.view_as(fused)

    @staticmethod
    def backward(ctx, grad):
        entry = ctx.entry
        if entry.grad is None:   # float32 of the first micro-batch's gradient, as autograd's cast
            entry.grad = grad.float() if grad.dtype != torch.float32 else grad.clone()
        else:
            entry.grad.add_(grad)       # + the next one, converted exactly, added in float32
        return None, None


class _Entry:
    def __init__(self, fused: torch.Tensor, parts: list[torch.Tensor]):
        self.fused, self.parts = fused, parts
        self.grad: torch.Tensor | None = None


class HeldWeights:
    """Fused (concatenated) and cast matrices made once for all the micro-batches of one
    minibatch instead of once per micro-batch (`Weights(model, dtype, held)`), and their
    gradients given to the model's parameters once, at `release`.

    Why: every `Weights` concatenates and casts every matrix (read 4 bytes, write 4 + 2 per
    parameter), and the backward casts each matrix's gradient to float32 again, per micro-batch:
    ~1 GB of memory traffic per micro-batch on a 135M model. Guaranteed: the same gradients to
    the bit. Per micro-batch autograd casts the fused matrix's gradient to float32, splits it and
    adds it to each parameter's `.grad`; here the same float32 values are added in the same order
    into one float32 buffer per fused matrix, whose row blocks become the parameters' `.grad`. The
    weights must not change between `Weights` calls and `release` (one minibatch: the optimizer
    steps after it). A tied LM head stays on the per-forward path (its gradient meets the
    embedding's inside each backward)."""

    def __init__(self) -> None:
        self._entries: dict[tuple[int, ...], _Entry] = {}

    def fuse(self, parts: list[torch.Tensor]) -> "_Cast":
        key = tuple(id(p) for p in parts)
        entry = self._entries.get(key)
        if entry is None:
            with torch.no_grad():
                entry = self._entries[key] = _Entry(torch.cat(parts), list(parts))
        return _Cast(entry)

    def single(self, weight: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        return self.fuse([weight]).to(dtype)

    def release(self) -> None:
        """Every held gradient to its parameters' `.grad` (row blocks of the float32 buffer;
        added where a `.grad` exists already); the held copies are dropped."""
        for entry in self._entries.values():
            if entry.grad is None:
                continue
            start = 0
            for p in entry.parts:
                n = p.shape[0]
                if p.requires_grad:
                    g = entry.grad[start:start + n]
                    if p.grad is None:
                        p.grad = g
                    else:
                        p.grad.add_(g)
                start += n
        self._entries.clear()


class _Cast:
    """`torch.cat(parts)` whose `.to(dtype)` is the held copy on this forward's graph."""

    def __init__(self, entry: _Entry):
        self.entry = entry

    def to(self, dtype: torch.dtype) -> torch.Tensor:
        entry = self.entry
        if entry.fused.dtype != dtype:
            with torch.no_grad():
                entry.fused = entry.fused.to(dtype)
        if not torch.is_grad_enabled():
            return entry.fused
        return _Held.apply(entry.fused.requires_grad_() if not entry.fused.requires_grad else entry.fused,
                           entry)
