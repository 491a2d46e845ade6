"""In-process sampling with a Hugging Face causal LM: a batched KV-cache decode loop.

Why not `model.generate`: per token it runs a stack of logits processors and stopping criteria and
returns no per-token log-probs without recomputing scores. This engine samples all n completions of
a chunk of prompts together, with a seeded generator, and records for every token the behaviour
log-prob as `rlvr.rollout.base` defines it (the temperature-scaled distribution after top-k /
top-p truncation, renormalised), the finish reason, the policy version and the seed. Each prompt
is encoded once and its keys/values are shared by its n samples; finished rows are dropped from
the batch as it shrinks.

Llama-family models (`fused_llama.supports`) decode through `fused_llama.Decoder`, a fused forward with a
static KV cache and no per-token framework overhead; any other causal LM decodes through its own
`forward` with the model's cache. With `autocast_bf16` the matrices run in bfloat16 (float32
residual stream), matching training under `model.autocast_bf16`. Models under 20M parameters
decode on one torch thread (restored afterwards): their per-token ops are too small to split.

Guaranteed: the same seed and the same weights give the same samples, bit for bit, on the same
machine and thread count. Not guaranteed: the same samples as `model.generate` for a given seed
(the random streams differ), or across engines. By default the engine shares the policy module, so
`load_weights` only stamps the version; over a separate copy it copies the weights in place.
"""

from __future__ import annotations

import inspect
from typing import Sequence

import torch

from rlvr.models.policy import left_pad, positions
from rlvr.models import fused_llama
from rlvr.models.device import Device
from rlvr.rollout.base import PromptEncoder, SamplingParams
from rlvr.rollout.sampling import sample_next, top_p_filter as _top_p_filter  # noqa: F401
from rlvr.types import Completion, Group, Problem


_SMALL_MODEL_PARAMS = 20_000_000   # below this, decode runs on one thread (see HFEngine.__init__)


class _Samples:
    """Per-row tokens, log-probs and finish state while a batch decodes (rows never move here)."""

    def __init__(self, rows: int, max_new: int, pad_id: int, eos_ids: set[int]):
        self.tokens = torch.full((rows, max_new), pad_id, dtype=torch.long)
        self.logps = torch.zeros((rows, max_new))
        self.done = torch.zeros(rows, dtype=torch.bool)
        self.lengths = torch.full((rows,), max_new, dtype=torch.long)
        self.eos = torch.tensor(sorted(eos_ids), dtype=torch.long)
        self.pad_id = pad_id

    def record(self, live: torch.Tensor, t: int, nxt: torch.Tensor, lp: torch.Tensor):
        """Store token t of rows `live`; returns (tokens to feed back, done flags of `live`)."""
        done = self.done[live]
        nxt = torch.where(done, torch.full_like(nxt, self.pad_id), nxt)
        self.tokens[live, t], self.logps[live, t] = nxt, lp
        hit = torch.isin(nxt, self.eos) & ~done
        self.lengths[live[hit]] = t + 1
        done = done | hit
        self.done[live] = done
        return nxt, done

    def rows(self) -> list[tuple[list[int], list[float], str]]:
        out = []
        for i in range(self.tokens.shape[0]):
            n_tok = int(self.lengths[i])
            reason = "stop" if bool(self.done[i]) else "length"
            out.append((self.tokens[i, :n_tok].tolist(), self.logps[i, :n_tok].tolist(), reason))
        return out


class HFEngine:
    """Rollout engine over an in-memory `PreTrainedModel` (shared with the trainer)."""

    def __init__(self, model, tokenizer, use_chat_template: bool = True, max_batch: int = 256,
                 autocast_bf16: bool | None = None, device: Device | None = None,
                 template_text: bool = False):
        self.model, self.tokenizer = model, tokenizer
        self.device = device or Device.cpu()
        if autocast_bf16 is None:   # sample in the precision the trainer uses
            autocast_bf16 = self.device.bf16
        self.prompts = PromptEncoder.for_model(model, tokenizer, use_chat_template, template_text)
        self.max_batch = max_batch
        self.autocast_bf16 = autocast_bf16
        self.version = 0
        self.sync_metrics: dict[str, float] = {}   # shared or copied in place: nothing to canary
        self.eos_ids = {tokenizer.eos_token_id} | set(_as_list(model.generation_config.eos_token_id))
        self.eos_ids.discard(None)
        self.pad_id, self.vocab_limit = self.prompts.pad_id, self.prompts.vocab_limit
        # transformers 5.x renamed `past_key_values` to `cache`; older releases know only the former.
        params = inspect.signature(model.forward).parameters
        self.cache_kw = "cache" if "cache" in params else "past_key_values"
        self._decode = self._decode_fused if fused_llama.supports(model) else self._decode_model
        if self.device.is_cuda:   # static cache + CUDA graphs; the CPU decode below is untouched
            from rlvr.rollout import cuda_decode
            self._decode = cuda_decode.build(self)
        # Per-token work of a small model is too fine to split across threads: each op's fork/join
        # costs more than it saves, and on a loaded 2-core machine a 2-thread team stalls (1M
        # model, 128 rows: 0.58 s with 1 thread vs 3.4 s with 2, median of 6, same process).
        small = sum(p.numel() for p in model.parameters()) < _SMALL_MODEL_PARAMS
        self.decode_threads = 1 if small else 0   # 0: keep the process setting

    def load_weights(self, policy, version: int = 0) -> None:
        """Stamp later groups with `version`; copy the weights only when this engine holds its own
        copy of the model (asynchronous rollouts), in place, so no module is rebuilt."""
        if policy is not self.model:
            from rlvr.models.lora import engine_state   # adapters arrive merged into the weights
            self.model.load_state_dict(engine_state(policy))
        self.version = version

    def close(self) -> None:
        """Nothing to release: the model belongs to the trainer."""
        return None

    def generate(self, problems: Sequence[Problem], n: int, params: SamplingParams,
                 seed: int) -> list[Group]:
        prompts = self.prompts.encode_all(problems)
        gen = self.device.generator(seed)
        per_chunk = max(1, self.max_batch // n)
        rows: list[tuple[list[int], list[float], str]] = []
        was_training, threads = self.model.training, torch.get_num_threads()
        self.model.eval()
        torch.set_num_threads(self.decode_threads or threads)
        try:
            for start in range(0, len(prompts), per_chunk):
                rows.extend(self._decode(prompts[start:start + per_chunk], n, params, gen))
        finally:
            torch.set_num_threads(threads)
            self.model.train(was_training)
        texts = self.tokenizer.batch_decode(
            [tokens[:-1] if reason == "stop" else tokens for tokens, _, reason in rows],
            skip_special_tokens=True)
        completions = [Completion(text, *row) for text, row in zip(texts, rows)]
        return [Group(p, prompts[i], completions[i * n:(i + 1) * n], self.version, seed)
                for i, p in enumerate(problems)]

    def continue_ids(self, prefixes: list[list[int]], params: SamplingParams,
                     gen: torch.Generator) -> list[tuple[list[int], list[float], str]]:
        """One continuation per token-id prefix, never re-encoded: (tokens, log-probs, finish
        reason) each, drawn from `gen`. The multi-turn episode loop (`rlvr.agents.episode`)
        calls this once per turn with each episode's ids so far."""
        was_training, threads = self.model.training, torch.get_num_threads()
        self.model.eval()
        torch.set_num_threads(self.decode_threads or threads)
        try:
            return [row for start in range(0, len(prefixes), self.max_batch)
                    for row in self._decode(prefixes[start:start + self.max_batch], 1, params, gen)]
        finally:
            torch.set_num_threads(threads)
            self.model.train(was_training)

    @torch.inference_mode()
    def _decode_fused(self, prompts: list[list[int]], n: int, params: SamplingParams,
                      gen: torch.Generator) -> list[tuple[list[int], list[float], str]]:
        dec = fused_llama.Decoder(self.model, torch.bfloat16 if self.autocast_bf16 else torch.float32)
        ids, mask = left_pad(prompts, self.pad_id)                      # [P, Tp]
        tp, max_new, rows = ids.shape[1], params.max_new_tokens, ids.shape[0] * n
        dec.allocate(rows, tp + max_new)
        pos = positions(mask)                                           # [P, Tp]
        cos, sin = dec.w.rope_table(int(pos.max()) + max_new + 1)       # [S, D]
        logits = dec.forward(ids, cos[pos][:, None], sin[pos][:, None], 0, fused_llama.prefix_mask(mask),
                             repeat=n)
        keymask = torch.cat([mask.bool().repeat_interleave(n, 0),
                             torch.ones((rows, max_new), dtype=torch.bool)], dim=1)
        next_pos = pos[:, -1].repeat_interleave(n) + 1                  # [B]
        samples = _Samples(rows, max_new, self.pad_id, self.eos_ids)
        live = torch.arange(rows)
        for t in range(max_new):
            nxt, done = samples.record(live, t, *sample_next(logits, params, gen))
            if bool(done.all()) or t + 1 == max_new:
                break
            if 4 * int(done.sum()) >= len(live):   # compact: finished rows cost a full row each
                keep = torch.nonzero(~done).squeeze(-1)
                live, nxt, keymask, next_pos = live[keep], nxt[keep], keymask[keep], next_pos[keep]
                dec.keep_rows(keep)
            logits = dec.forward(nxt[:, None], cos[next_pos][:, None, None], sin[next_pos][:, None, None],
                                 tp + t, keymask[:, None, None, :tp + t + 1])
            next_pos = next_pos + 1
        return samples.rows()

    @torch.inference_mode()
    def _decode_model(self, prompts: list[list[int]], n: int, params: SamplingParams,
                      gen: torch.Generator) -> list[tuple[list[int], list[float], str]]:
        ids, mask = left_pad([p for p in prompts for _ in range(n)], self.pad_id)
        pos = positions(mask)
        rows, max_new = ids.shape[0], params.max_new_tokens
        samples = _Samples(rows, max_new, self.pad_id, self.eos_ids)
        live = torch.arange(rows)
        with self.device.autocast(self.autocast_bf16):
            out = self.model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True,
                             logits_to_keep=1)
            next_pos = pos[:, -1:] + 1
            for t in range(max_new):
                nxt, done = samples.record(live, t, *sample_next(out.logits[:, -1].float(), params, gen))
                if bool(done.all()) or t + 1 == max_new:
                    break
                mask = torch.cat([mask, torch.ones((rows, 1), dtype=mask.dtype)], dim=1)
                out = self.model(input_ids=nxt[:, None], attention_mask=mask, position_ids=next_pos,
                                 use_cache=True, **{self.cache_kw: out.past_key_values})
                next_pos = next_pos + 1
        return samples.rows()


def _as_list(x) -> list:
    if x is None:
        return []
    return list(x) if isinstance(x, (list, tuple)) else [x]
