"""The training forward over real tokens only: the fused stack with every position-wise op (norms,
projections, rotary, MLP, residual adds) on the batch's real positions packed into one sequence,
and only the attention on the padded [B, T] layout.

Why: a GRPO micro-batch pads every completion to its longest one, and the padding runs through every
layer's matmuls and element-wise passes like a real token: on SmolLM2's preset batch a third of the
completion positions (4244 real of 6144), on the tiny model's 15-25 % of all positions. Attention is
per row, so it scatters q, k and v into the padded layout (zeros at padding: masked keys must stay
finite) and gathers its output back; the rest never sees a padding position.

Guaranteed: the values of `fused_llama.completion_head_inputs`' padded computation at every real
token (row-wise ops see the same rows; the attention the same keys at real positions and exact
zeros at masked ones), in the same order (row by row, real completion tokens only). Whether the
bits are the same depends on the matmul kernels summing each row alike whatever the row count (on
the CPUs measured: the same bits). Falls back to the padded forward where a row's last prompt
position is padding or a completion mask has a hole (no real position predicts the next token).

The packed sequence is rounded up to a bucket (`bucketed`: a multiple of the power of two below
1/32 of its length; the added rows hold zeros, and as nothing reads their outputs, neither
attention nor the loss, their gradients are exact zeros). Why: the real-token count differs in
every micro-batch, and every new row count costs oneDNN a freshly compiled kernel per matmul shape
(forward and both gradients, 2-7 ms each on the AMX Xeon measured) and the allocator blocks of
sizes it has not handed out before (fresh pages: 30-110 µs of system time a fault on that KVM guest);
a few dozen sizes get reused instead. On the tiny model's 28 updates of a run
(`bench/update_buckets.py`): 6.35 → 5.69 s (1.12×), minor faults 13.7 k → 4.9 k, system time
1.16 → 0.78 s, RSS after them 1020 → 863 MB; SmolLM2's preset update 12.13 s (12.54 s before,
another day: no loss from the added rows).
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F

from rlvr.models import fused_llama
from rlvr.models.held_weights import HeldWeights


# False: the packed sequence is exactly the real tokens (bench/update_buckets.py's baseline)
BUCKETS = True


def bucketed(n: int) -> int:
    """n rounded up to a multiple of the power of two nearest below n/32 (at least 16): at most
    1/32 more rows (≈ 1/64 on average), a few dozen sizes between any n and 2n."""
    if not BUCKETS:
        return n
    step = max(16, 1 << max(0, n.bit_length() - 6))
    return -(-n // step) * step


class _Scatter:
    """Moves per-token tensors between the packed layout [1, H, N', D] (the N real positions of
    mask [B, T], row by row, then N' - N rows of bucket padding: `bucketed`) and the padded one
    [B, H, T, D] (zeros at padding)."""

    def __init__(self, mask: torch.Tensor):
        self.b, self.t = mask.bool().nonzero(as_tuple=True)
        self.shape = mask.shape
        self.n = self.b.numel()
        self.rows = bucketed(self.n)

    def pad(self, x: torch.Tensor) -> torch.Tensor:
        """x [N, ...] with the bucket's zero rows appended: [N', ...]."""
        return torch.cat([x, x.new_zeros((self.rows - self.n, *x.shape[1:]))]) if self.rows > self.n else x

    def padded(self, x: torch.Tensor) -> torch.Tensor:
        out = x.new_zeros((self.shape[0], x.shape[1], self.shape[1], x.shape[3]))
        out[self.b, :, self.t] = x[0, :, :self.n].transpose(0, 1)
        return out

    def packed(self, x: torch.Tensor) -> torch.Tensor:
        return self.pad(x[self.b, :, self.t])[None].transpose(1, 2)

    def index(self) -> torch.Tensor:
        """[B, T] long: each real position's index in the packed sequence (-1 at padding)."""
        out = torch.full(self.shape, -1, dtype=torch.long, device=self.b.device)
        out[self.b, self.t] = torch.arange(self.b.numel(), device=self.b.device)
        return out


def _attend(scatter: _Scatter, bias: torch.Tensor,
            prefix: Callable[[int], tuple[torch.Tensor, torch.Tensor]] | None = None):
    """attend(layer, q, k, v) for `run_layers` on packed tokens: the padded eager attention; with
    `prefix` (per layer, the rows' prompt keys and values [B, K, Tp, D]) in front of the keys."""

    def attend(i, q, k, v):
        k, v = scatter.padded(k), scatter.padded(v)
        if prefix is not None:
            pk, pv = prefix(i)
            k, v = torch.cat([pk, k], 2), torch.cat([pv, v], 2)
        return scatter.packed(fused_llama.eager_attention(scatter.padded(q), k, v, bias))

    return attend


def _packable(prompt_mask: torch.Tensor, completion_mask: torch.Tensor) -> bool:
    """Every row's last prompt position is real and its completion is a prefix (right padding)."""
    cm = completion_mask.bool()
    return bool(prompt_mask[:, -1].bool().all()) and not bool((cm[:, 1:] & ~cm[:, :-1]).any())


def completion_head_inputs(model, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor,
                           completion_ids: torch.Tensor, completion_mask: torch.Tensor,
                           dtype: torch.dtype = torch.float32, share_prompts: bool = True,
                           held: HeldWeights | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """`fused_llama.completion_head_inputs` over real tokens only: (hidden [N, d], head [V, d]),
    the final-norm output at the positions predicting the N real completion tokens (row by row)
    and the LM head. Prompts shared by several rows run once (`fused_llama._shared_prompt`'s rule)."""
    if not _packable(prompt_mask, completion_mask):
        return fused_llama.completion_head_inputs(model, prompt_ids, prompt_mask, completion_ids,
                                                  completion_mask, dtype, share_prompts, held)
    w = fused_llama.Weights(model, dtype, held)
    if share_prompts and prompt_ids.shape[1] >= fused_llama.SHARED_PROMPT_MIN_TOKENS:
        prompts, masks, inverse = fused_llama._distinct_prompts(prompt_ids, prompt_mask)
        if prompts.shape[0] < prompt_ids.shape[0]:
            h = _shared_prompt(w, prompts, masks, inverse, completion_ids, completion_mask)
            return w.norm(h, w.final_norm), w.lm_head
    h = _whole(w, prompt_ids, prompt_mask, completion_ids, completion_mask)
    return w.norm(h, w.final_norm), w.lm_head


def _whole(w, prompt_ids, prompt_mask, completion_ids, completion_mask) -> torch.Tensor:
    """Prompt and completion as one packed sequence; the residual stream [N, d] at the positions
    that predict each real completion token."""
    ids = torch.cat([prompt_ids, completion_ids], dim=1)
    mask = torch.cat([prompt_mask, completion_mask], dim=1)
    real = mask.bool()
    pos = (mask.cumsum(-1) - 1).clamp_(min=0)
    cos, sin = w.rope_table(int(pos.max()) + 1)
    scatter = _Scatter(mask)
    bias = fused_llama.attention_bias(fused_llama.prefix_mask(mask), w.heads // w.kv_heads)
    p = scatter.pad(pos[real])   # the bucket's rows at position 0 (nothing reads them)
    h = fused_llama.run_layers(w, scatter.pad(F.embedding(ids[real], w.embed, w.padding_idx).float())[None],
                               cos[p][None, None], sin[p][None, None], _attend(scatter, bias))
    tp, tc = prompt_ids.shape[1], completion_ids.shape[1]
    # the position before completion token j is prompt_width - 1 + j: real wherever token j is
    return h[0, scatter.index()[:, tp - 1:tp - 1 + tc][completion_mask.bool()]]


def _shared_prompt(w, prompt_ids, prompt_mask, inverse, completion_ids, completion_mask) -> torch.Tensor:
    """`fused_llama._shared_prompt` with the completions packed: each distinct prompt runs once
    (`fused_llama._prompt_pass`, padded: prompts are left-padded to a common width), the
    completions' real tokens as one sequence whose attention reads its row's prompt keys and
    values in front of its own."""
    real = completion_mask.bool()
    p = fused_llama._prompt_pass(w, prompt_ids, prompt_mask, inverse, completion_mask, completion_ids[real])
    scatter = _Scatter(completion_mask)
    at = scatter.pad(p.positions[real])   # the bucket's rows at position 0 (nothing reads them)
    h_c = fused_llama.run_layers(w, scatter.pad(p.embedded)[None], p.cos[at][None, None],
                                 p.sin[at][None, None], _attend(scatter, p.bias, p.row_keys))
    # completion token 0 is predicted by its prompt's last position, token j > 0 by token j - 1
    b = completion_ids.shape[0]
    index = scatter.index()
    source = torch.cat([torch.arange(b, device=index.device)[:, None], b + index[:, :-1]], dim=1)[real]
    return torch.cat([p.last, h_c[0]])[source]
