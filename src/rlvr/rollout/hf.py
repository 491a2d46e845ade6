"""In-process sampling with a Hugging Face causal LM: a batched KV-cache decode loop.

Why not `model.generate`: per token it runs a stack of logits processors and stopping criteria and
returns no per-token log-probs without recomputing scores. This engine samples all n completions of
a chunk of prompts together, with a seeded generator, and records for every token the behaviour
log-prob as `rlvr.rollout.base` defines it (the temperature-scaled distribution after top-k /
top-p truncation, renormalised), the finish reason, the policy version and the seed. Each prompt
is encoded once and its keys/values are shared by its n samples; finished rows are dropped from
the batch as it shrinks. Stop strings cut each row after decoding (`rlvr.rollout.stop`; not in
`continue_ids`, whose episodes end on their own markers).

The forward is a backend from `rlvr.models.backends`, chosen once when the engine is built:
Llama-family models (`fused_llama.supports`) decode through the fused forward with a KV cache
that widens in chunks as columns fill (`decode_step.Decoder`) and no per-token framework
overhead; any other causal LM through its own `forward` with the model's cache.
`rlvr.rollout.decode.drive` is the one loop and the one finished-row bookkeeping around either.
With `autocast_bf16` the matrices run in bfloat16 (float32 residual stream), matching training
under `model.autocast_bf16`. Models under 20M parameters decode on one torch thread (restored
afterwards): their per-token ops are too small to split.

Guaranteed: the same seed and the same weights give the same samples, bit for bit, on the same
machine and thread count. Not guaranteed: the same samples as `model.generate` for a given seed
(the random streams differ), or across engines. By default the engine shares the policy module, so
`load_weights` stamps the version and drops the cached fused sampling weights; over a separate
copy it first copies the weights in place.
"""

from __future__ import annotations

from typing import Sequence

import torch

from rlvr.models.backends import FusedBackend, ModelBackend, backend_name
from rlvr.models.device import Device
from rlvr.rollout.base import PromptEncoder, SamplingParams
from rlvr.rollout.decode import Rows, drive
from rlvr.rollout.stop import cut_rows
from rlvr.types import Completion, Group, Problem


_SMALL_MODEL_PARAMS = 20_000_000   # below this, decode runs on one thread (see HFEngine.__init__)


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
        self._fused = FusedBackend(model, self.device, autocast_bf16)
        self._backends = {"fused": self._fused,
                          "model": ModelBackend(model, self.device, autocast_bf16)}
        self._decode = self._decode_fused if backend_name(model) == "fused" else self._decode_model
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
        self._fused.weights.invalidate()   # the update may not have bumped a version
        self.version = version

    def close(self) -> None:
        """Nothing to release: the model belongs to the trainer."""
        return None

    def share(self) -> "HFEngine":
        """The engine the rollouts run ahead with (`rollout.max_staleness > 0`): the same settings
        over a private copy of the model, which `load_weights` refreshes in place."""
        import copy

        return HFEngine(copy.deepcopy(self.model), self.tokenizer, self.prompts.use_chat_template,
                        self.max_batch, self.autocast_bf16, self.device, self.prompts.template_text)

    def generate(self, problems: Sequence[Problem], n: int, params: SamplingParams,
                 seed: int) -> list[Group]:
        prompts = self.prompts.encode_all(problems)
        gen = self.device.generator(seed)
        per_chunk = max(1, self.max_batch // n)
        rows: Rows = []
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
        if params.stop:
            rows, texts = cut_rows(rows, texts, self.tokenizer, params.stop, params.include_stop_str)
        completions = [Completion(text, *row) for text, row in zip(texts, rows)]
        return [Group(p, prompts[i], completions[i * n:(i + 1) * n], self.version, seed)
                for i, p in enumerate(problems)]

    def continue_ids(self, prefixes: list[list[int]], params: SamplingParams,
                     gen: torch.Generator) -> Rows:
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

    # The backend is chosen once, in __init__ (`self._decode`); these two stay separate names so
    # a caller can force the model's own forward on a Llama-family model (tests, `testing.zoo`).
    @torch.inference_mode()
    def _decode_fused(self, prompts: list[list[int]], n: int, params: SamplingParams,
                      gen: torch.Generator) -> Rows:
        return drive(self._backends["fused"], prompts, n, params, gen, self.pad_id, self.eos_ids)

    @torch.inference_mode()
    def _decode_model(self, prompts: list[list[int]], n: int, params: SamplingParams,
                      gen: torch.Generator) -> Rows:
        return drive(self._backends["model"], prompts, n, params, gen, self.pad_id, self.eos_ids)


def _as_list(x) -> list:
    if x is None:
        return []
    return list(x) if isinstance(x, (list, tuple)) else [x]


def from_config(cfg, model, tokenizer, device=None) -> HFEngine:
    """`rollout.engine: hf` (its row in `rollout.engines`): it samples in the trainer's precision
    (`device.bf16`), or the ratio is not 1 on-policy."""
    return HFEngine(model, tokenizer, use_chat_template=cfg.model.chat_template, device=device,
                    template_text=cfg.model.chat_template_text)
