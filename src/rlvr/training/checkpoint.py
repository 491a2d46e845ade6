"""Atomic checkpoints and exact resume.

A checkpoint is a directory `checkpoints/step-NNNNNN/` holding the model and tokenizer as a
Hugging Face checkpoint (safetensors), `trainer_state.pt` (optimizer, scheduler, RNG streams,
sampler state, step, metrics-log offsets), `config.yaml` (the config its weights were trained
with; resume compares it with the new one) and, written last, a `COMPLETE` marker. It is built in a
temporary sibling directory, every file fsynced, then renamed into place and the parent fsynced, so
a crash at any instant leaves either the previous checkpoint set or the new one, never half of
one. Directories without the marker are ignored and cleaned up.

`Checkpointer` is the run's part that decides where to resume from, writes a checkpoint every
`run.save_every` steps (rank 0 writes, the other ranks wait at a barrier), keeps the newest
`run.keep_last` plus the best by `run.best_metric`, and saves that best (its state: "best").
`RngState` is the part that saves and restores every RNG stream ("rng").
"""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from rlvr.errors import UserError

MARKER = "COMPLETE"
CONFIG = "config.yaml"   # in a checkpoint: the config its weights were trained with


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


def step_of(ckpt: Path | None) -> int:
    """The step a checkpoint directory holds (its COMPLETE marker's text), 0 for None."""
    if ckpt is None:
        return 0
    text = (ckpt / MARKER).read_text().strip()
    return int(text) if text.isdigit() else 0


def path_for(ckpt_root: Path, step: int) -> Path:
    return ckpt_root / f"step-{step:06d}"


def save(ckpt_root: Path, step: int, model, tokenizer, state: dict[str, Any],
         model_state: dict[str, torch.Tensor] | None = None, config_text: str = "") -> Path:
    """Write checkpoint `step` atomically; return its directory. `model_state`: the weights to
    write instead of the model's own (a gathered state dict of a sharded model); `config_text`:
    the run's config as YAML, kept as `config.yaml` (what the weights were trained with)."""
    ckpt_root.mkdir(parents=True, exist_ok=True)
    final = path_for(ckpt_root, step)
    tmp = ckpt_root / f".tmp-step-{step:06d}-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    model.save_pretrained(tmp, state_dict=model_state)
    tokenizer.save_pretrained(tmp)
    torch.save(state, tmp / "trainer_state.pt")
    if config_text:
        (tmp / CONFIG).write_text(config_text)
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


def prune(ckpt_root: Path, keep_last: int, keep: frozenset[Path] | set[Path] = frozenset()) -> None:
    """Keep the newest `keep_last` complete checkpoints plus those in `keep` (e.g. the best)."""
    found = complete_checkpoints(ckpt_root)
    for p in found[:-keep_last] if keep_last else found:
        if p not in keep:
            shutil.rmtree(p, ignore_errors=True)


def load_state(ckpt: Path) -> dict[str, Any]:
    # on the CPU: every rank reading tensors saved from GPU 0 back onto GPU 0 would pile the world's
    # optimizer state there; `load_state_dict` moves each state to its parameter's device
    return torch.load(ckpt / "trainer_state.pt", map_location="cpu", weights_only=False)


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


class RngState:
    """Python, NumPy, torch and CUDA generators, as one stateful part of a run."""

    def state_dict(self) -> dict[str, Any]:
        return {"rng": rng_state()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        set_rng_state(state["rng"])


class Checkpointer:
    def __init__(self, run_dir: Path | str, keep_last: int, dp=None):
        self.dir, self.root = Path(run_dir), Path(run_dir) / "checkpoints"
        self.keep_last, self.dp = keep_last, dp
        self.is_main = dp is None or dp.rank == 0
        self.best: tuple[float, Path | None] = (float("-inf"), None)

    def resume_point(self, mode: str) -> Path | None:
        """The checkpoint `run.resume` (never | auto | PATH) names, or None for a fresh start."""
        if mode == "never":
            if latest(self.root) is not None:
                raise UserError(f"run.dir {self.dir} already holds checkpoints; use a new run.dir, "
                                "or run.resume=auto to continue that run")
            return None
        if mode == "auto":
            if self.is_main:
                clean_partial(self.root)
            if self.dp is not None:
                self.dp.barrier()
            return latest(self.root)
        path = Path(mode)
        if not (path / MARKER).is_file():
            raise UserError(f"run.resume: {path} is not a complete checkpoint directory")
        return path

    def save(self, done: int, metric: float | None, state: dict[str, Any], model, tokenizer,
             model_state: dict[str, torch.Tensor] | None, alarm: Callable[[dict], None],
             config_text: str = "") -> Path:
        """Write checkpoint `done` (rank 0) and prune; a failed write raises an alarm through
        `alarm` and leaves the previous checkpoints as they were."""
        if not self.is_main:
            self.dp.barrier()                         # rank 0 writes; the others wait for it
            return path_for(self.root, done)
        try:
            path = save(self.root, done, model, tokenizer, state, model_state, config_text)
            if self.dp is not None:
                self.dp.barrier()
        except OSError as exc:
            alarm({"step": done, "event": "alarm", "name": "checkpoint_failed",
                   "message": f"checkpoint write failed ({exc}); the previous one is intact",
                   "action": "free disk space or fix permissions on run.dir"})
            if self.dp is not None:
                self.dp.barrier()
            return self.best[1] or self.root
        if metric is not None and metric > self.best[0]:
            self.best = (metric, path)
        prune(self.root, self.keep_last, {self.best[1]} if self.best[1] else set())
        return path

    def state_dict(self) -> dict[str, Any]:
        return {"best": [self.best[0], str(self.best[1]) if self.best[1] else None]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        best_metric, best_path = state.get("best", [float("-inf"), None])
        self.best = (best_metric, Path(best_path) if best_path else None)
