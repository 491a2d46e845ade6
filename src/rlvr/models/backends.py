"""The two forward backends of a causal LM, each with the operations sampling and training need:
prefill (prompts → last-position logits and a cursor), a decode step (`cursor.step`), and the
log-probs and entropies of completion tokens (`logp_entropy`). Chosen once per model by
`backend_name` (a dict lookup), never re-decided per token or per micro-batch.

`fused` (Llama/Qwen2, `fused_llama.supports`): fused weights, a KV cache (widened in chunks as it
fills) whose finished rows can be dropped (`drops_rows`), attention as two matmuls and a float32
softmax. `model`: the model's own forward and cache under the device's autocast; its rows stay
until the batch ends.

Guaranteed: a backend's log-probs and its decode logits are the same computation (the fused
backend agrees with the model's own forward to float rounding), and the same inputs give the same
numbers, bit for bit, on the same machine. With `vocab_limit` set, decode logits of ids at or
beyond it are -inf (the GPU engine's padded vocabularies); `logp_entropy` never masks (the chunked
GPU training forward in `rlvr.training.gpu_forward` does). Not guaranteed: the fused cache on any
device but the CPU (on a GPU the engine decodes through `rlvr.rollout.cuda_decode`).
"""

from __future__ import annotations

import contextlib
import inspect
from typing import Protocol, Sequence

import torch
import torch.nn.functional as F

from rlvr.algo.logp_entropy import logp_entropy
from rlvr.algo.losses import token_entropy
from rlvr.models import decode_step, fused_llama, packed
from rlvr.models.batch import Batch
from rlvr.models.device import Device
from rlvr.models.policy import completion_logits, left_pad, positions, token_logprobs


class Cursor(Protocol):
    """One batch being decoded: feeds the sampled tokens back and returns the next logits."""

    def step(self, tokens: torch.Tensor, t: int) -> torch.Tensor: ...

    def keep_rows(self, index: torch.Tensor) -> None: ...


class Backend(Protocol):
    name: str
    drops_rows: bool          # finished rows can leave the batch (`Cursor.keep_rows`)
    device: Device

    def context(self): ...

    def prefill(self, prompts: Sequence[Sequence[int]], n: int, max_new: int,
                pad_id: int) -> tuple[torch.Tensor, Cursor]: ...

    def logp_entropy(self, batch: Batch, temperature: float) -> tuple[torch.Tensor, torch.Tensor]: ...


def _from_logits(logits: torch.Tensor, batch: Batch, temperature: float):
    logits = logits.float()
    if temperature != 1.0:
        logits = logits / temperature
    return token_logprobs(logits, batch.completion_ids), token_entropy(logits)


def _tensors(batch: Batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    return batch.prompt_ids, batch.prompt_mask, batch.completion_ids, batch.completion_mask


class FusedBackend:
    name, drops_rows = "fused", True

    def __init__(self, model, device: Device | None = None, autocast: bool = False,
                 vocab_limit: int | None = None):
        self.model, self.device, self.vocab_limit = model, device or Device.cpu(), vocab_limit
        self.dtype = torch.bfloat16 if autocast else torch.float32
        self.weights = fused_llama.WeightCache(model, self.dtype)   # sampling only; training refuses
        self._held: fused_llama.HeldWeights | None = None

    @contextlib.contextmanager
    def minibatch(self):
        """Training forwards inside share one cast of the weights (`fused_llama.HeldWeights`);
        the parameters' gradients are complete when the block ends (not before), the same bits
        as one cast per forward. The weights must not change inside."""
        held = self._held = fused_llama.HeldWeights()
        try:
            yield
            held.release()
        finally:
            self._held = None

    def context(self):
        return contextlib.nullcontext()   # the fused weights carry the precision

    def prefill(self, prompts, n, max_new, pad_id):
        dec = decode_step.Decoder(self.model, self.dtype, self.weights.get())
        ids, mask = left_pad(prompts, pad_id)                           # [P, Tp]
        tp, rows = ids.shape[1], ids.shape[0] * n
        # widened as it fills where the step attends over every allocated column (bf16); a float32
        # step reads only the filled columns, so there growing would only add copies
        grows = decode_step.WHOLE_CACHE.get(self.dtype, False)
        dec.allocate(rows, tp + max_new, filled=tp if grows else None)
        pos = positions(mask)                                           # [P, Tp]
        cos, sin = dec.w.rope_table(int(pos.max()) + max_new + 1)       # [S, D]
        logits = dec.forward(ids, cos[pos][:, None], sin[pos][:, None], 0,
                             fused_llama.prefix_mask(mask), repeat=n)
        keymask = torch.cat([mask.bool().repeat_interleave(n, 0),       # completion columns are
                             torch.zeros((rows, max_new), dtype=torch.bool)], dim=1)   # opened per step
        cursor = _FusedCursor(dec, cos, sin, keymask, pos[:, -1].repeat_interleave(n) + 1, tp,
                              self.vocab_limit)
        return _mask_vocab(logits, self.vocab_limit), cursor

    def logp_entropy(self, batch: Batch, temperature: float):
        """The fused stack over the call's real tokens only (packed into one sequence; attention
        per row: `packed.completion_head_inputs`), then the LM head and one log-softmax over the
        real completion tokens (`algo.logp_entropy`); padding positions of the [B, Tc] results are
        0 (every consumer masks them). The values of `completion_logits` → log-softmax at the real
        tokens (to the matmuls' rounding)."""
        # this call's own padding columns cut (a micro-batch's rows are often shorter than the
        # batch's longest): positions come from the masks, so the real tokens' values are the same
        cut = batch.trimmed()
        real = cut.completion_mask.bool()
        hidden, head = packed.completion_head_inputs(self.model, *_tensors(cut), self.dtype,
                                                     held=self._held)
        logp, entropy = logp_entropy(F.linear(hidden, head), cut.completion_ids[real], temperature)
        full = batch.completion_mask.bool()
        zeros = torch.zeros(full.shape, dtype=logp.dtype, device=logp.device)
        return zeros.masked_scatter(full, logp), zeros.masked_scatter(full, entropy)


class _FusedCursor:
    def __init__(self, dec, cos, sin, keymask, next_pos, tp: int, vocab_limit: int | None):
        self.dec, self.cos, self.keymask, self.next_pos = dec, cos, keymask, next_pos
        self.sin = decode_step.fold_sin(sin)   # the decode step's rotary table (`Decoder.step`)
        self.tp, self.vocab_limit = tp, vocab_limit

    def keep_rows(self, index: torch.Tensor) -> None:
        self.keymask, self.next_pos = self.keymask[index], self.next_pos[index]
        self.dec.keep_rows(index)

    def step(self, tokens: torch.Tensor, t: int) -> torch.Tensor:
        pos = self.next_pos
        self.keymask[:, self.tp + t] = True
        logits = self.dec.step(tokens, self.cos[pos][:, None], self.sin[pos][:, None], self.tp + t,
                               self.keymask)
        self.next_pos = pos + 1
        return _mask_vocab(logits, self.vocab_limit)


class ModelBackend:
    name, drops_rows = "model", False

    def __init__(self, model, device: Device | None = None, autocast: bool = False,
                 vocab_limit: int | None = None):
        self.model, self.device, self.autocast = model, device or Device.cpu(), autocast
        self.vocab_limit = vocab_limit
        self._cache_kw: str | None = None

    @property
    def cache_kw(self) -> str:
        # transformers 5.x renamed `past_key_values` to `cache`; older releases know only the former.
        if self._cache_kw is None:
            params = inspect.signature(self.model.forward).parameters
            self._cache_kw = "cache" if "cache" in params else "past_key_values"
        return self._cache_kw

    def context(self):
        return self.device.autocast(self.autocast)

    def prefill(self, prompts, n, max_new, pad_id):
        ids, mask = (self.device.to(x) for x in left_pad([p for p in prompts for _ in range(n)], pad_id))
        pos = positions(mask)
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True,
                         logits_to_keep=1)
        cursor = _ModelCursor(self, mask, pos[:, -1:] + 1, out.past_key_values)
        return self.last_logits(out), cursor

    def last_logits(self, out) -> torch.Tensor:
        return _mask_vocab(out.logits[:, -1].float(), self.vocab_limit)

    def logp_entropy(self, batch: Batch, temperature: float):
        with self.device.autocast(self.autocast):
            logits = completion_logits(self.model, *_tensors(batch))
        return _from_logits(logits, batch, temperature)


class _ModelCursor:
    def __init__(self, backend: ModelBackend, mask, next_pos, cache):
        self.backend, self.mask, self.next_pos, self.cache = backend, mask, next_pos, cache

    def keep_rows(self, index: torch.Tensor) -> None:
        raise NotImplementedError("the model's own cache keeps every row (drops_rows is False)")

    def step(self, tokens: torch.Tensor, t: int) -> torch.Tensor:
        b = self.backend
        self.mask = torch.cat([self.mask, torch.ones_like(self.mask[:, :1])], dim=1)
        out = b.model(input_ids=tokens[:, None], attention_mask=self.mask, position_ids=self.next_pos,
                      use_cache=True, **{b.cache_kw: self.cache})
        self.next_pos, self.cache = self.next_pos + 1, out.past_key_values
        return b.last_logits(out)


def _mask_vocab(logits: torch.Tensor, vocab_limit: int | None) -> torch.Tensor:
    if vocab_limit is not None:
        logits[:, vocab_limit:] = float("-inf")
    return logits


BACKENDS: dict[str, type] = {"fused": FusedBackend, "model": ModelBackend}


def backend_name(model) -> str:
    """`fused` for the Llama family `fused_llama` reproduces exactly, else `model`."""
    return "fused" if fused_llama.supports(model) else "model"


def choose(model, device: Device | None = None, autocast: bool = False,
           vocab_limit: int | None = None) -> Backend:
    return BACKENDS[backend_name(model)](model, device, autocast, vocab_limit)
