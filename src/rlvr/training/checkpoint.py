"""Atomic checkpoints and exact resume.

A checkpoint is a directory `checkpoints/step-NNNNNN/` holding the model and tokenizer as a
Hugging Face checkpoint (safetensors), `trainer_state.pt` (optimizer, scheduler, RNG streams,
sampler state, step, metrics-log offsets) and, written last, a `COMPLETE` marker. It is built in a
temporary sibling directory, every file fsynced, then renamed into place and the parent fsynced, so
a crash at any instant leaves either the previous checkpoint set or the new one, never half of
one. Directories without the marker are ignored and cleaned up.
"""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

MARKER = "COMPLETE"


def _fsync_tree(path: Path) -> None:
    for p in sorted(path.rglob("*")):
        if p.is_file():
            with p.open("rb") as f:
                os.fsync(f.fileno())
    _fsync_dir(path)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def rng_state() -> dict[str, Any]:
    state = {"python": random.getstate(), "numpy": np.random.get_state(),
             "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def path_for(ckpt_root: Path, step: int) -> Path:
    return ckpt_root / f"step-{step:06d}"


def save(ckpt_root: Path, step: int, model, tokenizer, state: dict[str, Any],
         model_state: dict[str, torch.Tensor] | None = None) -> Path:
    """Write checkpoint `step` atomically; return its directory. `model_state`: the weights to
    write instead of the model's own (a gathered state dict of a sharded model)."""
    ckpt_root.mkdir(parents=True, exist_ok=True)
    final = path_for(ckpt_root, step)
    tmp = ckpt_root / f".tmp-step-{step:06d}-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    model.save_pretrained(tmp, state_dict=model_state)
    tokenizer.save_pretrained(tmp)
    torch.save(state, tmp / "trainer_state.pt")
    (tmp / MARKER).write_text(str(step))
    _fsync_tree(tmp)
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    _fsync_dir(ckpt_root)
    return final


def complete_checkpoints(ckpt_root: Path) -> list[Path]:
    if not ckpt_root.is_dir():
        return []
    found = [p for p in ckpt_root.glob("step-*") if (p / MARKER).is_file()]
    return sorted(found, key=lambda p: int(p.name.split("-")[1]))


def latest(ckpt_root: Path) -> Path | None:
    found = complete_checkpoints(ckpt_root)
    return found[-1] if found else None


def clean_partial(ckpt_root: Path) -> None:
    """Remove temp directories left by a crash during a write."""
    if ckpt_root.is_dir():
        for p in ckpt_root.glob(".tmp-step-*"):
            shutil.rmtree(p, ignore_errors=True)


def prune(ckpt_root: Path, keep_last: int, keep: set[Path] = frozenset()) -> None:
    """Keep the newest `keep_last` complete checkpoints plus those in `keep` (e.g. the best)."""
    found = complete_checkpoints(ckpt_root)
    for p in found[:-keep_last] if keep_last else found:
        if p not in keep:
            shutil.rmtree(p, ignore_errors=True)


def load_state(ckpt: Path) -> dict[str, Any]:
    return torch.load(ckpt / "trainer_state.pt", weights_only=False)


def read_weights(ckpt: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    state: dict[str, torch.Tensor] = {}
    for f in sorted(ckpt.glob("*.safetensors")):
        state.update(load_file(str(f)))
    return state


def load_weights(model, ckpt: Path) -> None:
    if (ckpt / "adapter_config.json").is_file():   # a LoRA run: the checkpoint holds the adapter
        from rlvr.models.lora import load_adapter_weights
        return load_adapter_weights(model, ckpt)
    state = read_weights(ckpt)
    missing, unexpected = model.load_state_dict(state, strict=False)
    tied = {"lm_head.weight"} if getattr(model.config, "tie_word_embeddings", False) else set()
    if set(missing) - tied or unexpected:
        raise RuntimeError(f"checkpoint {ckpt} does not match the model: missing {missing}, "
                           f"unexpected {unexpected}")
