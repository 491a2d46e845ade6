"""Supervised fine-tuning on completion tokens only: the cold start before RL, and distillation.

Three sources of (prompt, completion) pairs: the built-in task's step-by-step reasoner (fresh
problems every step, or a fixed pool of `pool` traces), a JSONL of {prompt, completion} rows, and a
teacher model whose sampled completions are kept only when the verifier passes them (distillation by
rejection sampling). Loss: mean cross-entropy over completion tokens (prompt tokens are masked).
Training can stop early once held-out greedy accuracy reaches `stop_accuracy` — a deliberately
partial cold start for the quickstart. `sft_episodes` is the masked variant for multi-turn
episodes (`rlvr sft --task agentic`): the loss counts model tokens only, observation tokens are
context; its rows come encoded (`rlvr.agents.cold_start`), so this module knows no episode layout.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import torch
import torch.nn.functional as F

from rlvr.errors import DataError
from rlvr.models.device import Device
from rlvr.models.policy import completion_logits, encode_prompt, left_pad, right_pad
from rlvr.training.schedule import lr_multiplier
from rlvr.types import Problem

Pair = tuple[list[int], list[int]]  # (prompt ids, completion ids incl. EOS)


@dataclass(frozen=True)
class SFTConfig:
    steps: int = 300
    batch_size: int = 64
    lr: float = 1e-3
    warmup_steps: int = 50
    betas: tuple[float, float] = (0.9, 0.98)
    grad_clip: float = 1.0
    eval_every: int = 25
    stop_accuracy: float = 0.0     # > 0: stop once the eval callback reports at least this
    min_steps: int = 0             # no evaluation (so no stop) before this many steps
    seed: int = 0


def encode_pair(tokenizer, problem: Problem, completion: str) -> Pair:
    ids = tokenizer(completion, add_special_tokens=False)["input_ids"]
    return encode_prompt(tokenizer, problem), list(ids) + [tokenizer.eos_token_id]


def task_pairs(task, tokenizer, batch_size: int, seed: int, pool: int = 0) -> Iterator[list[Pair]]:
    """Batches of reasoner traces: fresh problems each step, or drawn from a fixed pool."""
    rng = random.Random(f"sft/{seed}")
    fixed = [encode_pair(tokenizer, p, task.trace(p)) for p in task.sample(rng, pool)] if pool else None
    while True:
        if fixed is not None:
            yield [rng.choice(fixed) for _ in range(batch_size)]
        else:
            yield [encode_pair(tokenizer, p, task.trace(p)) for p in task.sample(rng, batch_size)]


def pair_of(row: Any, where: str) -> tuple[Any, str]:
    """(prompt, completion text) of a row in any of TRL's prompt-completion shapes: {prompt: text or
    messages, completion: text or [assistant messages]}, or {messages: [..., assistant message]}
    (the last assistant turn is the completion, the turns before it the prompt)."""
    if isinstance(row, dict) and "messages" in row and "prompt" not in row:
        msgs = row["messages"]
        if (isinstance(msgs, list) and len(msgs) >= 2 and all(isinstance(m, dict) for m in msgs)
                and msgs[-1].get("role") == "assistant" and isinstance(msgs[-1].get("content"), str)):
            return msgs[:-1], msgs[-1]["content"]
        raise DataError("'messages' must be a list of {role, content} turns ending with the "
                        "assistant's", where=where)
    completion = row.get("completion") if isinstance(row, dict) else None
    if isinstance(completion, list) and completion and all(
            isinstance(m, dict) and m.get("role") == "assistant" and isinstance(m.get("content"), str)
            for m in completion):
        completion = "".join(m["content"] for m in completion)
    if not isinstance(row, dict) or not isinstance(completion, str) or not row.get("prompt"):
        raise DataError("each row needs 'prompt' (text or messages) and 'completion' (text or "
                        "assistant messages), or 'messages' ending with the assistant's turn", where=where)
    return row["prompt"], completion


def jsonl_pairs(path: str | Path, tokenizer, batch_size: int, seed: int) -> Iterator[list[Pair]]:
    """Batches from a JSONL of prompt-completion rows (see `pair_of` for the shapes)."""
    pairs = []
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"invalid JSON ({exc.msg})", where=f"{path}:{n}") from None
        prompt, completion = pair_of(row, f"{path}:{n}")
        pairs.append(encode_pair(tokenizer, Problem(str(n), prompt), completion))
    if not pairs:
        raise DataError("no rows (the file is empty)", where=str(path))
    rng = random.Random(f"sft/{seed}")
    while True:
        yield [rng.choice(pairs) for _ in range(batch_size)]


def distill_pairs(teacher_engine, tokenizer, problems: Sequence[Problem], verifiers: dict, k: int,
                  params, stats: dict | None = None) -> list[Pair]:
    """Rejection sampling: k teacher samples per problem, keep those the verifier passes.
    `stats`, when given, receives what the teacher generated (kept or not): samples and tokens."""
    from rlvr.evaluation.metrics import score_groups

    groups = teacher_engine.generate(problems, k, params, seed=0)
    score_groups(groups, verifiers)
    pairs = []
    if stats is not None:   # the cost of distillation includes the rejected samples
        stats["samples"] = sum(len(g.completions) for g in groups)
        stats["completion_tokens"] = sum(len(c.token_ids) for g in groups for c in g.completions)
    for g in groups:
        for c in g.completions:
            if c.score.correct:
                pairs.append(encode_pair(tokenizer, g.problem, c.text))
    return pairs


def task_probe(model, tokenizer, task, *, n: int = 200, max_new_tokens: int = 48,
               report: Callable[[int, float], None] | None = None, device=None) -> Callable[[int], float]:
    """evaluate(step) for `sft`: greedy accuracy on a fixed held-out probe of the built-in task
    (n problems, seed 99), reported to `report(step, accuracy)`; leaves the model in train mode."""
    from rlvr.evaluation.metrics import greedy_accuracy
    from rlvr.rollout.hf import HFEngine
    from rlvr.tasks.arithmetic import ArithmeticVerifier

    probe, engine = task.heldout(n, seed=99), HFEngine(model, tokenizer, device=device)
    verifiers = {"arithmetic": ArithmeticVerifier()}

    def evaluate(step: int) -> float:
        acc = greedy_accuracy(engine, probe, verifiers, max_new_tokens)["eval/accuracy"]
        if report:
            report(step, acc)
        model.train()
        return acc

    return evaluate


def sft_loss(model, batch: list[Pair], pad_id: int, device: Device = Device.cpu()) -> torch.Tensor:
    prompt_ids, prompt_mask = (device.to(t) for t in left_pad([p for p, _ in batch], pad_id))
    comp_ids, comp_mask = (device.to(t) for t in right_pad([c for _, c in batch], pad_id))
    with device.autocast():
        logits = completion_logits(model, prompt_ids, prompt_mask, comp_ids, comp_mask)
    loss = F.cross_entropy(logits.flatten(0, 1).float(), comp_ids.flatten(), reduction="none")
    mask = comp_mask.flatten().float()
    return (loss * mask).sum() / mask.sum()


def sft(model, tokenizer, batches: Iterator[list[Pair]], cfg: SFTConfig,
        evaluate: Callable[[int], float] | None = None,
        log: Callable[[dict], None] | None = None, device: Device = Device.cpu()) -> dict:
    """Train on completion tokens; returns {"steps", "loss", "accuracy"} (accuracy: last eval)."""
    torch.manual_seed(cfg.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=cfg.betas)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_multiplier("constant", cfg.steps, cfg.warmup_steps))
    pad_id = tokenizer.pad_token_id
    model.train()
    accuracy, loss_value, step = None, float("nan"), 0
    for step in range(1, cfg.steps + 1):
        loss_value = _apply(model, opt, sched, sft_loss(model, next(batches), pad_id, device), cfg.grad_clip)
        record = {"sft_step": step, "sft/loss": loss_value}
        if evaluate and cfg.eval_every and step % cfg.eval_every == 0 and step >= cfg.min_steps:
            accuracy = evaluate(step)
            record["sft/accuracy"] = accuracy
        if log:
            log(record)
        if cfg.stop_accuracy and accuracy is not None and step >= cfg.min_steps \
                and accuracy >= cfg.stop_accuracy:
            break
    return {"steps": step, "loss": loss_value, "accuracy": accuracy}


Row = tuple[list[int], list[int], list[int]]   # (prompt ids, completion ids, loss mask)


def sft_episodes(model, pad_id: int, batches: Callable[[int], Sequence[Row]], steps: int,
                 lr: float = 1e-3, log: Callable[[str], None] = print) -> list[float]:
    """`steps` AdamW steps of masked cross-entropy on `batches(step)`; returns the losses."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.98))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 20))
    model.train()
    losses = []
    for step in range(steps):
        rows = batches(step)
        p_ids, p_mask = left_pad([p for p, _, _ in rows], pad_id)
        c_ids, c_mask = right_pad([c for _, c, _ in rows], pad_id)
        loss_mask, _ = right_pad([m for _, _, m in rows], 0)
        logits = completion_logits(model, p_ids, p_mask, c_ids, c_mask).float()   # [B, T, V]
        ce = F.cross_entropy(logits.transpose(1, 2), c_ids, reduction="none")     # [B, T]
        losses.append(_apply(model, opt, sched, (ce * loss_mask).sum() / loss_mask.sum(), 1.0))
        if step % 50 == 0 or step == steps - 1:
            log(f"  sft step {step}: loss {losses[-1]:.3f}")
    return losses


def _apply(model, opt, sched, loss: torch.Tensor, grad_clip: float) -> float:
    """One clipped AdamW step on `loss` and one schedule step; returns the loss."""
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    opt.step()
    sched.step()
    return float(loss.detach())
