"""In-process sampling with a Hugging Face causal LM: a batched KV-cache decode loop.

Why not `model.generate`: per token it runs a stack of logits processors and stopping criteria and
returns no per-token log-probs without recomputing scores; this loop does one model call per token
for the whole batch, samples with a seeded generator, and records the sampling log-prob (under
softmax(logits / temperature), before top-p truncation — the same quantity the trainer recomputes)
and the finish reason. The engine shares the policy module, so `load_weights` is a no-op.
"""

from __future__ import annotations

import inspect
from typing import Sequence

import torch

from rlvr.policy import encode_prompt, left_pad, positions
from rlvr.rollout.base import SamplingParams
from rlvr.types import Completion, Group, Problem


def _top_p_filter(logits: torch.Tensor, top_p: float) -> torch.Tensor:
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    cum = sorted_logits.softmax(-1).cumsum(-1)
    drop = cum - sorted_logits.softmax(-1) > top_p  # keep the token that crosses top_p
    sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
    return torch.empty_like(logits).scatter_(-1, order, sorted_logits)


class HFEngine:
    """Rollout engine over an in-memory `PreTrainedModel` (shared with the trainer)."""

    def __init__(self, model, tokenizer, use_chat_template: bool = True, max_batch: int = 256):
        self.model, self.tokenizer = model, tokenizer
        self.use_chat_template = use_chat_template
        self.max_batch = max_batch
        self.eos_ids = {tokenizer.eos_token_id} | set(_as_list(model.generation_config.eos_token_id))
        self.eos_ids.discard(None)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        # transformers 5.x renamed `past_key_values` to `cache`; older releases know only the former.
        params = inspect.signature(model.forward).parameters
        self.cache_kw = "cache" if "cache" in params else "past_key_values"

    def load_weights(self, policy) -> None:
        return None

    def generate(self, problems: Sequence[Problem], n: int, params: SamplingParams,
                 seed: int) -> list[Group]:
        prompts = [encode_prompt(self.tokenizer, p, self.use_chat_template) for p in problems]
        flat = [ids for ids in prompts for _ in range(n)]
        gen = torch.Generator().manual_seed(seed)
        rows: list[tuple[list[int], list[float], str]] = []
        for start in range(0, len(flat), self.max_batch):
            rows.extend(self._decode(flat[start:start + self.max_batch], params, gen))
        groups = []
        for i, problem in enumerate(problems):
            completions = [self._completion(*rows[i * n + j]) for j in range(n)]
            groups.append(Group(problem, prompts[i], completions))
        return groups

    def _completion(self, tokens: list[int], logprobs: list[float], reason: str) -> Completion:
        text_tokens = tokens[:-1] if reason == "stop" else tokens
        text = self.tokenizer.decode(text_tokens, skip_special_tokens=True)
        return Completion(text, tokens, logprobs, reason)

    @torch.inference_mode()
    def _decode(self, prompts: list[list[int]], params: SamplingParams, gen: torch.Generator):
        was_training = self.model.training
        self.model.eval()
        ids, mask = left_pad(prompts, self.pad_id)
        pos = positions(mask)
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True,
                         logits_to_keep=1)
        past, logits = out.past_key_values, out.logits[:, -1, :]
        batch = ids.shape[0]
        tokens = torch.full((batch, params.max_new_tokens), self.pad_id, dtype=torch.long)
        logps = torch.zeros((batch, params.max_new_tokens))
        done = torch.zeros(batch, dtype=torch.bool)
        lengths = torch.full((batch,), params.max_new_tokens, dtype=torch.long)
        eos = torch.tensor(sorted(self.eos_ids), dtype=torch.long)
        next_pos = pos[:, -1:] + 1
        for t in range(params.max_new_tokens):
            nxt, lp = self._sample(logits, params, gen)
            nxt = torch.where(done, torch.full_like(nxt, self.pad_id), nxt)
            tokens[:, t], logps[:, t] = nxt, lp
            hit = torch.isin(nxt, eos) & ~done
            lengths[hit] = t + 1
            done |= hit
            if bool(done.all()) or t + 1 == params.max_new_tokens:
                break
            mask = torch.cat([mask, torch.ones((batch, 1), dtype=mask.dtype)], dim=1)
            out = self.model(input_ids=nxt[:, None], attention_mask=mask, position_ids=next_pos,
                             use_cache=True, **{self.cache_kw: past})
            past, logits = out.past_key_values, out.logits[:, -1, :]
            next_pos = next_pos + 1
        if was_training:
            self.model.train()
        rows = []
        for i in range(batch):
            n_tok = int(lengths[i])
            reason = "stop" if bool(done[i]) else "length"
            rows.append((tokens[i, :n_tok].tolist(), logps[i, :n_tok].tolist(), reason))
        return rows

    @staticmethod
    def _sample(logits: torch.Tensor, params: SamplingParams, gen: torch.Generator):
        logits = logits.float()
        if params.greedy:
            logp = torch.log_softmax(logits, dim=-1)
            nxt = logits.argmax(dim=-1)
            return nxt, logp.gather(-1, nxt[:, None]).squeeze(-1)
        scaled = logits / params.temperature
        logp = torch.log_softmax(scaled, dim=-1)
        probs_src = _top_p_filter(scaled, params.top_p) if params.top_p < 1.0 else scaled
        nxt = torch.multinomial(torch.softmax(probs_src, dim=-1), 1, generator=gen).squeeze(-1)
        return nxt, logp.gather(-1, nxt[:, None]).squeeze(-1)


def _as_list(x) -> list:
    if x is None:
        return []
    return list(x) if isinstance(x, (list, tuple)) else [x]
