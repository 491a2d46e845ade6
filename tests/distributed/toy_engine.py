"""A rollout engine written outside the package, as a user would: it samples token by token with
the model's plain forward over the whole sequence (no KV cache, no rlvr decode loop), shares the
policy's modules, and records what it was asked (rank, seed, problem ids) in a JSON-lines file.
`toy_engine_worker.py` registers it with `rlvr.register_engine` and trains with it."""

from __future__ import annotations

import json
import os

import torch

from rlvr.rollout.base import PromptEncoder
from rlvr.types import Completion, Group


class ToyEngine:
    def __init__(self, model, tokenizer, prompts: PromptEncoder, log: str = ""):
        self.model, self.tokenizer, self.prompts, self.log = model, tokenizer, prompts, log
        self.version, self.sync_metrics = 0, {}

    def _sample(self, ids: list[int], params, gen) -> Completion:
        tokens, logprobs, reason, x = [], [], "length", torch.tensor([ids])
        for _ in range(params.max_new_tokens):
            logits = self.model(input_ids=x).logits[0, -1].float() / params.temperature
            if self.prompts.vocab_limit is not None:
                logits[self.prompts.vocab_limit:] = float("-inf")
            logp = torch.log_softmax(logits, -1)
            t = int(torch.multinomial(logp.exp(), 1, generator=gen))
            tokens.append(t)
            logprobs.append(float(logp[t]))
            x = torch.cat([x, torch.tensor([[t]])], 1)
            if t == self.tokenizer.eos_token_id:
                reason = "stop"
                break
        text = self.tokenizer.decode(tokens[:-1] if reason == "stop" else tokens, skip_special_tokens=True)
        return Completion(text, tokens, logprobs, reason)

    @torch.no_grad()
    def generate(self, problems, n, params, seed):
        gen = torch.Generator().manual_seed(seed)
        was_training = self.model.training
        self.model.eval()
        try:
            groups = []
            for p in problems:
                ids = self.prompts.encode(p)
                groups.append(Group(p, ids, [self._sample(ids, params, gen) for _ in range(n)],
                                    self.version, seed))
        finally:
            self.model.train(was_training)
        if self.log:
            with open(self.log, "a") as f:
                f.write(json.dumps({"rank": int(os.environ.get("RANK", "0")), "seed": seed,
                                    "problems": [p.id for p in problems]}) + "\n")
        return groups

    def load_weights(self, policy, version: int = 0) -> None:
        self.version = version          # the policy's own modules: nothing to copy

    def close(self) -> None:
        return None


def build(cfg, model, tokenizer, device=None) -> ToyEngine:
    """The builder `register_engine` takes: (cfg, model, tokenizer, device) -> engine."""
    prompts = PromptEncoder.for_model(model, tokenizer, cfg.model.chat_template, cfg.model.chat_template_text)
    rank = os.environ.get("RANK", "0")
    log = os.path.join(os.environ["TOY_ENGINE_LOG"], f"rank{rank}.jsonl") if "TOY_ENGINE_LOG" in os.environ else ""
    return ToyEngine(model, tokenizer, prompts, log)


def length_reward(prompts, completions, **kwargs) -> list[float]:
    """A TRL-style reward that varies within a group (the tiny model never solves arithmetic), so
    every step has advantages and an update."""
    return [len(c) / 10 for c in completions]
