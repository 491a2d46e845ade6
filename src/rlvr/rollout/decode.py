"""The one decode driver and the one finished-row bookkeeping, for every sampling path.

`Samples` holds, per row, the sampled tokens, their behaviour log-probs (as `rlvr.rollout.base`
defines them), whether the row has finished (an EOS id sampled) and its length, on any device;
`record` stores one step for a set of live rows with no host sync, which is what lets the GPU
decode capture it in a CUDA graph (`rlvr.rollout.cuda_decode`). `drive` is the loop around a
`models.backends.Backend`: prefill, then sample, record, stop, drop finished rows (backends that
can, once a quarter of the live rows have finished: a finished row costs a full row each step) and
step. It looks at the finished flags every `check_every` steps (1 on the CPU; on a GPU each look
is a host sync, so fewer).

Guaranteed: the same seed, weights and backend give the same rows, bit for bit; a finished row is
padded with `pad_id` and its length counts its EOS. Not guaranteed: the same rows across backends
(the arithmetic differs in rounding), or any use of the generator other than one draw per step.
"""

from __future__ import annotations

from typing import Sequence

import torch

from rlvr.rollout.base import SamplingParams
from rlvr.rollout.sampling import sample_next

Rows = list[tuple[list[int], list[float], str]]   # (tokens, log-probs, finish reason) per row


class Samples:
    """Per-row tokens, log-probs and finish state while a batch decodes (rows never move here)."""

    def __init__(self, rows: int, max_new: int, pad_id: int, eos_ids, device=None):
        self.tokens = torch.full((rows, max_new), pad_id, dtype=torch.long, device=device)
        self.logps = torch.zeros((rows, max_new), device=device)
        self.done = torch.zeros(rows, dtype=torch.bool, device=device)
        self.lengths = torch.full((rows,), max_new, dtype=torch.long, device=device)
        self.eos = torch.tensor(sorted(eos_ids), dtype=torch.long, device=device)
        self.pad_id, self.max_new = pad_id, max_new

    def reset(self) -> None:
        """Empty every row in place (the buffers keep their addresses, as captured graphs need)."""
        self.tokens.fill_(self.pad_id)
        self.logps.zero_()
        self.done.zero_()
        self.lengths.fill_(self.max_new)

    def record(self, live: torch.Tensor, col: torch.Tensor, nxt: torch.Tensor, lp: torch.Tensor):
        """Store token `col` ([1] long) of rows `live`; returns (tokens to feed back, done flags of
        `live`). A row already finished gets `pad_id`."""
        cols = col.expand(live.shape[0])
        done = self.done[live]
        nxt = torch.where(done, torch.full_like(nxt, self.pad_id), nxt)
        self.tokens.index_put_((live, cols), nxt)
        self.logps.index_put_((live, cols), lp)
        hit = (nxt[:, None] == self.eos[None]).any(-1) & ~done
        self.lengths.index_put_((live,), torch.where(hit, cols + 1, self.lengths[live]))
        done = done | hit
        self.done.index_put_((live,), done)
        return nxt, done

    def rows(self, count: int | None = None) -> Rows:
        """The first `count` rows (all by default) as (tokens, log-probs, "stop" | "length")."""
        count = self.tokens.shape[0] if count is None else count
        tokens, logps = self.tokens[:count].cpu(), self.logps[:count].cpu()
        done, lengths = self.done[:count].cpu(), self.lengths[:count].cpu()
        out = []
        for i in range(count):
            k = int(lengths[i])
            out.append((tokens[i, :k].tolist(), logps[i, :k].tolist(), "stop" if bool(done[i]) else "length"))
        return out


def drive(backend, prompts: Sequence[Sequence[int]], n: int, params: SamplingParams,
          gen: torch.Generator, pad_id: int, eos_ids, check_every: int = 1) -> Rows:
    """n samples of each prompt through `backend` (a `models.backends.Backend`), drawn from `gen`."""
    max_new, rows = params.max_new_tokens, len(prompts) * n
    dev = backend.device.torch
    samples = Samples(rows, max_new, pad_id, eos_ids, dev)
    live = torch.arange(rows, device=dev)
    with backend.context():
        logits, cursor = backend.prefill(prompts, n, max_new, pad_id)
        for t in range(max_new):
            col = torch.full((1,), t, dtype=torch.long, device=dev)
            nxt, done = samples.record(live, col, *sample_next(logits, params, gen))
            if t + 1 == max_new or ((t + 1) % check_every == 0 and bool(done.all())):
                break
            if backend.drops_rows and 4 * int(done.sum()) >= len(live):
                keep = torch.nonzero(~done).squeeze(-1)
                live, nxt = live[keep], nxt[keep]
                cursor.keep_rows(keep)
            logits = cursor.step(nxt, t)
    return samples.rows()
