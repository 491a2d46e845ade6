"""What a run prints before its first step: the start banner and the resume line.

A batch job's log should say, in its first lines, what is being trained on what: the model (and
its size), the data (a built-in task or the files, with problem counts), the verifiers, the device
and precision, the thread count, the steps, the run directory; and when the run continues a
checkpoint, which one, at which step, with which config changes. Printed on rank 0, flushed at
once (a log that stays empty until the end is no log).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from rlvr.config import Config
from rlvr.config.resume import describe


def say(text: str) -> None:
    print(text, flush=True)


def _data(cfg: Config, train: Sequence[Any], heldout: Sequence[Any]) -> str:
    d = cfg.data
    if d.task:
        source = f"task {d.task}"
    else:
        source = f"{d.train_path} ({len(train)} problems)"
    return f"{source}; held-out {d.eval_path or ('task' if d.task else 'none')} ({len(heldout)} problems)"


def banner(cfg: Config, device: Any, policy: Any, verifiers: dict[str, Any], train: Sequence[Any],
           heldout: Sequence[Any]) -> str:
    import torch

    from rlvr.models.device import host_allocator

    params = sum(p.numel() for p in policy.parameters()) / 1e6
    precision = "bf16 autocast" if getattr(device, "bf16", False) else str(cfg.model.dtype)
    g = cfg.grpo
    lines = [
        f"rlvr train: {g.steps} steps x {g.prompts_per_step} prompts x {g.group_size} completions "
        f"-> {cfg.run.dir}",
        f"  model: {cfg.model.path} ({params:.1f}M parameters"
        f"{f', LoRA r={cfg.model.lora.r}' if cfg.model.lora.r else ''})",
        f"  data: {_data(cfg, train, heldout)}",
        f"  verifiers: {', '.join(sorted(verifiers)) or 'none'}",
        f"  device: {getattr(device, 'torch', device)} ({precision}); threads: {torch.get_num_threads()}; "
        f"allocator: {host_allocator()}; engine: {cfg.rollout.engine}",
    ]
    lines += [f"  {v.sandbox_line()}" for v in verifiers.values() if hasattr(v, "sandbox_line")]
    return "\n".join(lines)


def resume_note(ckpt: Path, start: int, total: int, changed: list[tuple[str, Any, Any]]) -> str:
    lines = [f"resuming from {ckpt} (step {start} of {total})"]
    if changed:
        lines.append(f"  config changes from this step on: {describe(changed)}")
    if start >= total:
        lines.append(f"  the run already finished {total} steps: nothing to train (raise grpo.steps, "
                     "or use a new run.dir for a new run)")
    return "\n".join(lines)


def unknown_text_warning(tokenizer: Any, problems: Sequence[Any], limit: int = 500) -> str | None:
    """A warning when prompts hold text the tokenizer maps to its unknown token (the built-in tiny
    model's character vocabulary turns most real prompts into `<unk>`), or None; reads at most
    `limit` prompts."""
    unk = getattr(tokenizer, "unk_token_id", None)
    if unk is None or not problems:
        return None
    sample = list(problems)[:limit]
    texts = [p.prompt if isinstance(p.prompt, str) else " ".join(m["content"] for m in p.prompt)
             for p in sample]
    bad = [t for t in texts if unk in tokenizer(t, add_special_tokens=False)["input_ids"]]
    if not bad:
        return None
    chars = sorted({c for t in bad[:20] for c in set(t)
                    if tokenizer(c, add_special_tokens=False)["input_ids"] == [unk]})
    shown = " ".join(repr(c) for c in chars[:20]) + (" ..." if len(chars) > 20 else "")
    return (f"warning: {len(bad)} of {len(sample)} prompts hold text this tokenizer does not know, "
            f"read as {tokenizer.unk_token!r}: {shown or 'sequences'}. The model cannot see it; "
            "use a model whose tokenizer covers the data (model.path: a Hugging Face model)")
