"""GPU decoding for `HFEngine`: a static KV cache, one decode step captured in a CUDA graph.

`HFEngine` picks this module when its device is a GPU; the CPU decode in `hf.py` is untouched.

Llama/Qwen2 (`fused_llama.supports`): `GraphDecoder` keeps the fused weights (refreshed in place
before each call, so the captured graphs stay valid while training changes the weights), a KV
cache of `rows × S` slots per layer, and every per-step tensor (last token, positions, key mask,
write slot, output buffers) at fixed addresses. One decode step — the forward, the key-mask and
cache writes, sampling (an exponential race, which draws from the device's default generator
that CUDA graphs can replay) and the bookkeeping of finished rows — is captured once per batch
bucket and replayed with no host work. A plan (cache, buffers, graphs) is keyed on buckets, not
on the call's sizes: rows, S (prompt width + max new tokens) and max new tokens each rounded up
to a power of two (`bucket`), so agent turns and evaluation remainders of other sizes replay a
plan already captured; a call's extra rows start finished and are never returned. At most
`MAX_PLANS` plans are kept, the least recently used evicted first, so the training batch's plan
(used every step) outlives other calls' plans. Finished rows cost work only until the live rows fit a
smaller bucket (halvings of the batch, down to `min_bucket`): then the live rows move to the front
of every buffer and the smaller bucket's graph takes over. The host looks at the finished flags
every `check_every` steps only, so a step never waits for the GPU. Ids at or beyond the tokenizer's
length (padded vocabularies) get -inf logits and are never sampled; their mass is left out of the
recorded log-probs too, as in the GPU training forward (`vocab_limit` there).

Other architectures (`hf_decode`): the model's own forward with its cache, on the device, through
the same driver as the CPU engine (`rlvr.rollout.decode.drive`). The finished-row bookkeeping is
`decode.Samples` on both paths.

Recorded log-probs mean what they mean in `hf.py` (after temperature, before top-p). Guaranteed:
the same seed, weights and batch give the same samples on the same GPU and software versions;
every tensor a captured graph reads (KV cache, per-step state, rotary tables) belongs to its plan
and the fused weights to the decoder, for as long as the graph exists; a capture may run in a
background thread while another thread allocates (asynchronous rollouts).
Not guaranteed: the same samples as the CPU engine for a seed (different random streams), or
bit-equal logits to the CPU path (bf16 kernels differ). With `use_graphs=False` (and on a CPU,
where the unit tests run it) the same step runs eagerly.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import torch
import torch.nn.functional as F

from rlvr.models import fused_llama
from rlvr.models.backends import ModelBackend
from rlvr.models.policy import left_pad, positions
from rlvr.rollout.base import SamplingParams
from rlvr.rollout.decode import Rows, Samples, drive
from rlvr.rollout.sampling import sample_on_device

MAX_PLANS = 4          # caches and graph pools are large: keep a few


def bucket(n: int, least: int = 1) -> int:
    """The plan size serving `n`: the next power of two, at least `least`."""
    return max(least, 1 << max(0, n - 1).bit_length())


class _State:
    """Every tensor a decode step reads or writes, allocated once per (rows, S, max_new), and
    owned here for as long as the plan (and its captured graphs) lives: a graph replays raw
    addresses, so a tensor it reads that nothing else holds is freed memory on the next call. That
    includes the rotary tables (`cos`, `sin` [S, D]), built once for the plan, not per call."""

    def __init__(self, w, rows: int, slots: int, max_new: int, dev, pad_id: int, eos: list[int]):
        self.cos, self.sin = w.rope_table(slots)
        shape = (rows, w.kv_heads, slots, w.head_dim)
        self.k = [torch.zeros(shape, dtype=w.dtype, device=dev) for _ in w.layers]
        self.v = [torch.zeros(shape, dtype=w.dtype, device=dev) for _ in w.layers]
        self.keymask = torch.zeros((rows, slots), dtype=torch.bool, device=dev)
        self.tok = torch.zeros(rows, dtype=torch.long, device=dev)
        self.pos = torch.zeros(rows, dtype=torch.long, device=dev)
        self.rows = torch.arange(rows, device=dev)            # global row id of each slot
        self.slot = torch.zeros(1, dtype=torch.long, device=dev)
        self.tcol = torch.zeros(1, dtype=torch.long, device=dev)
        self.samples = Samples(rows, max_new, pad_id, eos, dev)

    def record(self, b: int, nxt: torch.Tensor, lp: torch.Tensor) -> None:
        """Store token `tcol` of the first b slots' rows; advance the per-row state (no host sync)."""
        nxt, _ = self.samples.record(self.rows[:b], self.tcol, nxt, lp)
        self.tok[:b].copy_(nxt)
        self.pos[:b].add_(1)
        self.slot.add_(1)
        self.tcol.add_(1)

    def compact(self, b: int, b2: int) -> None:
        """Move the live rows among the first b slots to the front; keep b2 slots."""
        done = self.samples.done[self.rows[:b]]
        sel = torch.cat([torch.nonzero(~done).squeeze(-1), torch.nonzero(done).squeeze(-1)])[:b2]
        for buf in [*self.k, *self.v, self.keymask, self.tok, self.pos, self.rows]:
            buf[:b2].copy_(buf[:b].index_select(0, sel))


class GraphDecoder:
    """Static-cache fused decode for one model, with CUDA graphs per batch bucket on a GPU."""

    def __init__(self, model, device, dtype: torch.dtype, pad_id: int, eos_ids: set[int],
                 vocab_limit: int | None = None, use_graphs: bool | None = None,
                 min_bucket: int = 8, check_every: int = 8):
        self.model, self.device, self.dtype = model, device, dtype
        self.w = fused_llama.Weights(model, dtype)
        self.pad_id, self.eos = pad_id, sorted(eos_ids)
        self.vocab_limit = vocab_limit
        self.use_graphs = device.is_cuda if use_graphs is None else use_graphs
        self.min_bucket, self.check_every = min_bucket, check_every
        self.plans: dict[tuple, tuple[_State, dict[int, object]]] = {}
        self.pool = torch.cuda.graph_pool_handle() if self.use_graphs else None   # shared by buckets

    def refresh(self) -> None:
        """Copy the model's current weights into the fused buffers the graphs read."""
        new = fused_llama.Weights(self.model, self.dtype)
        pairs = [(self.w.embed, new.embed), (self.w.final_norm, new.final_norm),
                 (self.w.lm_head, new.lm_head)]
        for a, b in zip(self.w.layers, new.layers):
            pairs += [(getattr(a, f), getattr(b, f)) for f in a.__dataclass_fields__
                      if getattr(a, f) is not None]
        with torch.no_grad():
            for old, cur in pairs:
                if old.data_ptr() != cur.data_ptr():
                    old.copy_(cur)

    def buckets(self, rows: int) -> list[int]:
        sizes = [rows]
        while sizes[-1] // 2 >= self.min_bucket:
            sizes.append(sizes[-1] // 2)
        return sizes

    def _step(self, st: _State, b: int, params: SamplingParams) -> None:
        """One decode step for the first b slots, reading and writing only `st`'s tensors (and
        the fused weights, which `refresh` updates in place)."""
        w, nk, hd, cos, sin = self.w, self.w.kv_heads, self.w.head_dim, st.cos, st.sin
        keymask = st.keymask[:b]
        keymask.index_fill_(1, st.slot, True)
        pos = st.pos[:b]

        def attend(i, q, k, v):
            kc, vc = st.k[i][:b], st.v[i][:b]
            kc.index_copy_(2, st.slot, k)
            vc.index_copy_(2, st.slot, v)
            qg = q.reshape(b, nk, -1, hd)                                     # [b, K, H/K, D]
            scores = (qg @ kc.transpose(-1, -2)).float() * hd ** -0.5         # [b, K, H/K, S]
            probs = scores.masked_fill(~keymask[:, None, None, :], float("-inf")).softmax(-1)
            return (probs.to(vc.dtype) @ vc).reshape(b, -1, 1, hd)            # [b, H, 1, D]

        h = F.embedding(st.tok[:b, None], w.embed).float()
        h = fused_llama.run_layers(w, h, cos[pos][:, None, None], sin[pos][:, None, None], attend)
        st.record(b, *sample_on_device(self._mask(fused_llama.logits(w, h[:, -1])), params))

    def _mask(self, logits: torch.Tensor) -> torch.Tensor:
        if self.vocab_limit is not None and self.vocab_limit < logits.shape[-1]:
            logits[:, self.vocab_limit:] = float("-inf")
        return logits

    def _plan(self, rows: int, slots: int, max_new: int, params: SamplingParams):
        """The plan of these bucket sizes (captured on first use), now the most recently used."""
        key = (rows, slots, max_new, replace(params, max_new_tokens=max_new))
        if key in self.plans:
            self.plans[key] = self.plans.pop(key)
        else:
            st = _State(self.w, rows, slots, max_new, self.device.torch, self.pad_id, self.eos)
            steps = {b: self._capture(st, b, params) for b in self.buckets(rows)}
            if len(self.plans) >= MAX_PLANS:
                self.plans.pop(next(iter(self.plans)))
            self.plans[key] = (st, steps)
        return self.plans[key]

    def _capture(self, st: _State, b: int, params):
        run = lambda: self._step(st, b, params)  # noqa: E731
        if not self.use_graphs:
            return run
        stream = torch.cuda.Stream(self.device.torch)
        stream.wait_stream(torch.cuda.current_stream(self.device.torch))
        with torch.cuda.stream(stream):
            for _ in range(2):               # warm-up before capture, as CUDA graphs require
                st.slot.zero_()
                st.tcol.zero_()
                run()
        torch.cuda.current_stream(self.device.torch).wait_stream(stream)
        st.slot.zero_()
        st.tcol.zero_()
        graph = torch.cuda.CUDAGraph()
        # thread_local: with asynchronous rollouts this runs in a background thread while the
        # trainer thread allocates; the default ("global") mode fails such a capture.
        with torch.cuda.graph(graph, pool=self.pool, capture_error_mode="thread_local"):
            run()
        return graph.replay

    @torch.inference_mode()
    def decode(self, prompts: list[list[int]], n: int, params: SamplingParams, seed: int) -> Rows:
        dev = self.device.torch
        ids, mask = left_pad(prompts, self.pad_id)                          # [P, Tp] host
        tp, max_new, rows = ids.shape[1], params.max_new_tokens, ids.shape[0] * n
        self.refresh()
        st, steps = self._plan(bucket(rows, self.min_bucket), bucket(tp + max_new, 64),
                               bucket(max_new, 64), params)
        with self.device.seeded(seed):
            first = self._prefill(st, ids.to(dev), mask.to(dev), n)
            st.samples.reset()
            st.samples.lengths.fill_(max_new)
            st.samples.done[rows:] = True                 # the bucket's extra rows: never live
            st.rows.copy_(torch.arange(st.rows.shape[0], device=dev))
            st.tcol.zero_()
            st.record(rows, *sample_on_device(self._mask(first), params))
            st.slot.fill_(tp)
            self._loop(st, steps, rows, max_new)
        return st.samples.rows(rows)

    def _prefill(self, st: _State, ids, mask, n: int) -> torch.Tensor:
        """Prompt keys/values into cache slots [0, Tp) of all rows (each prompt encoded once)."""
        tp = ids.shape[1]
        pos = positions(mask)
        allowed = fused_llama.prefix_mask(mask.cpu()).to(ids.device)

        rows = ids.shape[0] * n

        def attend(i, q, k, v):
            st.k[i][:rows, :, :tp] = k.repeat_interleave(n, 0)
            st.v[i][:rows, :, :tp] = v.repeat_interleave(n, 0)
            return fused_llama.eager_attention(q, k, v, allowed)

        h = fused_llama.run_layers(self.w, F.embedding(ids, self.w.embed).float(), st.cos[pos][:, None],
                                   st.sin[pos][:, None], attend)
        st.keymask.zero_()
        st.keymask[:rows, :tp] = mask.bool().repeat_interleave(n, 0)
        st.keymask[rows:, 0] = True         # extra rows attend to one slot: finite, never read
        st.pos.zero_()
        st.tok.fill_(self.pad_id)
        st.pos[:rows] = pos[:, -1].repeat_interleave(n)   # record() advances it to the new token's
        return fused_llama.logits(self.w, h[:, -1]).repeat_interleave(n, 0)

    def _loop(self, st: _State, steps: dict, rows: int, max_new: int) -> None:
        sizes = sorted(steps, reverse=True)
        b = min(s for s in sizes if s >= rows)
        for t in range(1, max_new):
            if (t - 1) % self.check_every == 0:     # the only host syncs of the loop
                live = int((~st.samples.done[st.rows[:b]]).sum())
                if live == 0:
                    return
                fit = min(s for s in sizes if s >= live)
                if fit < b:
                    st.compact(b, fit)
                    b = fit
            steps[b]()


def hf_decode(engine, prompts: list[list[int]], n: int, params: SamplingParams,
              gen: torch.Generator) -> Rows:
    """Any causal LM on the device: its own forward and cache (finished rows keep computing; the
    host looks at the finished flags every 8 steps)."""
    backend = ModelBackend(engine.model, engine.device, engine.autocast_bf16, engine.vocab_limit)
    gen = on_device(gen, engine.device)
    with torch.inference_mode():
        return drive(backend, prompts, n, params, gen, engine.pad_id, engine.eos_ids, check_every=8)


def on_device(gen: torch.Generator, device) -> torch.Generator:
    """`gen` when it draws on `device`; else a generator there, seeded by one draw from `gen` (the
    episode loop hands `continue_ids` a host generator, and `torch.multinomial` on GPU
    probabilities refuses one)."""
    if gen.device == device.torch:
        return gen
    return device.generator(int(torch.randint(2**62, (1,), generator=gen, device=gen.device)))


def build(engine):
    """The decode function `HFEngine` uses on a GPU: graphs for Llama/Qwen2, else `hf_decode`."""
    if not fused_llama.supports(engine.model):
        return lambda prompts, n, params, gen: hf_decode(engine, prompts, n, params, gen)
    dtype = torch.bfloat16 if engine.autocast_bf16 else torch.float32
    # deterministic mode runs the same step eagerly: deterministic index kernels may not capture
    decoder = GraphDecoder(engine.model, engine.device, dtype, engine.pad_id, engine.eos_ids,
                           engine.vocab_limit, use_graphs=not engine.device.deterministic)

    def decode(prompts: Sequence[Sequence[int]], n: int, params: SamplingParams, gen) -> Rows:
        seed = int(torch.randint(2**62, (1,), generator=gen, device=gen.device))
        return decoder.decode([list(p) for p in prompts], n, params, seed)

    decode.decoder = decoder
    return decode
