"""Model and tokenizer loading, prompt encoding, and per-token log-probs of completions.

Any `AutoModelForCausalLM` checkpoint loads from a local path (or a hub id where the user has
network), a `.gguf` file or `builtin:smollm2-135m-instruct` (models/resolve.py says how each is
found). `builtin:tiny-llama` builds the embedded default model in memory. As in TRL, prompts given
as chat messages go through the tokenizer's chat template when it has one, and plain-text prompts
are tokenized as they are unless `template_text` asks to wrap them as one user message first.
Nothing here knows about GRPO.
"""

from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F

from rlvr.errors import UserError
from rlvr.models.quiet import quiet_transformers
from rlvr.types import Problem

BUILTIN_TINY = "builtin:tiny-llama"
BUILTIN_TINY_ASCII = "builtin:tiny-llama-ascii"  # the same model over printable ASCII, 256 positions


def load_policy(path: str, dtype: str = "float32", seed: int = 0, device=None):
    """(model, tokenizer) from a checkpoint path, hub id, or `builtin:tiny-llama`, with the model
    on `device` (a `rlvr.models.device.Device`; None leaves it where it was built)."""
    model, tokenizer = _load(path, dtype, seed)
    return (model if device is None else model.to(device.torch)), tokenizer


def _load(path: str, dtype: str, seed: int):
    quiet_transformers()
    if path == BUILTIN_TINY:
        from rlvr.models.tiny import build_model
        model, tokenizer = build_model(seed)
        return model.to(getattr(torch, dtype)), tokenizer
    if path == BUILTIN_TINY_ASCII:
        from rlvr.models.tiny import ASCII_CHARS, build_model
        model, tokenizer = build_model(seed, max_positions=256, chars=ASCII_CHARS)
        return model.to(getattr(torch, dtype)), tokenizer
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rlvr.models.resolve import resolve_model_path

    path = resolve_model_path(path)
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, padding_side="left")
        model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, dtype))
    except OSError as exc:
        raise UserError(f"model.path: cannot load a Hugging Face model from {path!r} ({exc})") from exc
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer


def load_reference(policy) -> torch.nn.Module:
    """A frozen copy of the initial policy for the KL term."""
    import copy

    ref = copy.deepcopy(policy)
    ref.eval()
    for p in ref.parameters():
        p.requires_grad_(False)
    return ref


def encode_prompt(tokenizer, problem: Problem, use_chat_template: bool = True,
                  template_text: bool = False) -> list[int]:
    """Token ids for a problem's prompt: chat template for messages when the tokenizer has one
    (and for text too, as one user message, with `template_text`)."""
    prompt = problem.prompt
    if isinstance(prompt, str) and template_text and use_chat_template:
        prompt = [{"role": "user", "content": prompt}]
    if isinstance(prompt, list):
        if use_chat_template and getattr(tokenizer, "chat_template", None):
            ids = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True)
            # transformers 5 returns a BatchEncoding (a mapping, not a dict); 4.x a list of ids
            return list(ids["input_ids"] if hasattr(ids, "keys") else ids)
        prompt = "\n".join(f"{m['role']}: {m['content']}" for m in prompt) + "\nassistant:"
    return list(tokenizer(prompt)["input_ids"])


def left_pad(seqs: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """[B, T] ids and attention mask with sequences aligned to the right."""
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        if s:
            ids[i, width - len(s):] = torch.tensor(s, dtype=torch.long)
            mask[i, width - len(s):] = 1
    return ids, mask


def right_pad(seqs: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(1, max(len(s) for s in seqs))
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, :len(s)] = torch.tensor(s, dtype=torch.long)
        mask[i, :len(s)] = 1
    return ids, mask


def positions(mask: torch.Tensor) -> torch.Tensor:
    return (mask.cumsum(-1) - 1).clamp_(min=0)


def completion_logits(model, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor,
                      completion_ids: torch.Tensor, completion_mask: torch.Tensor) -> torch.Tensor:
    """Logits that predict each completion token: [B, Tc, V].

    Layout is [left-padded prompt | right-padded completion]; only the last Tc + 1 positions go
    through the LM head (`logits_to_keep`), which matters for large vocabularies.
    """
    ids = torch.cat([prompt_ids, completion_ids], dim=1)
    mask = torch.cat([prompt_mask, completion_mask], dim=1)
    tc = completion_ids.shape[1]
    out = model(input_ids=ids, attention_mask=mask, position_ids=positions(mask),
                use_cache=False, logits_to_keep=tc + 1)
    return out.logits[:, :-1, :]


def token_logprobs(logits: torch.Tensor, tokens: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """log π(token) under softmax(logits / temperature): [B, T]."""
    if temperature != 1.0:
        logits = logits / temperature
    logp = F.log_softmax(logits.float(), dim=-1)
    return logp.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
