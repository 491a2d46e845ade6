"""The distillation teacher: a larger model that rlvr itself trained to high accuracy on the task.

Same builder and tokenizer as the built-in tiny model, but hidden 192 / 4 layers / MLP 768
(2.3M parameters against the student's 1.05M; hidden 256 / 6 layers, 6.3M, was too slow to
train on the shared 2-core machine), SFT on the reasoner's traces until a held-out
probe of 200 problems reaches `stop_accuracy`. It is not the procedural reasoner: its samples are
wrong some of the time, so the verifier has something to reject. Cached in
`runs/experiments/teacher/`; its training cost is written to `teacher_cost.json` next to it so
the distillation experiment can state it (it is a sunk cost there, counted both ways).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from experiments.common import ROOT, built_once, say

SHAPE = {"hidden": 192, "layers": 4, "heads": 4, "mlp": 768}


def n_params(model) -> int:
    return sum(p.numel() for p in model.parameters())


def build_teacher(task, stop_accuracy: float = 0.85, seed: int = 0, max_steps: int = 1200) -> Path:
    """SFT the larger model until greedy held-out accuracy >= stop_accuracy; cached by directory."""
    return built_once(ROOT / "teacher", lambda: _build(ROOT / "teacher", task, stop_accuracy, seed, max_steps))


def _build(out: Path, task, stop_accuracy: float, seed: int, max_steps: int) -> Path:
    from rlvr.models.quiet import quiet_transformers
    from rlvr.models.tiny import build_model
    from rlvr.training.sft import SFTConfig, sft, task_pairs, task_probe

    quiet_transformers()
    model, tokenizer = build_model(seed, **SHAPE)
    evals: list[tuple[int, float]] = []
    evaluate = task_probe(model, tokenizer, task, report=lambda s, a: (
        evals.append((s, a)), say(f"  teacher step {s}: held-out accuracy {a:.1%}")))
    cfg = SFTConfig(steps=max_steps, stop_accuracy=stop_accuracy, min_steps=150, seed=seed)
    t0, c0 = time.perf_counter(), time.process_time()
    result = sft(model, tokenizer, task_pairs(task, tokenizer, cfg.batch_size, seed), cfg, evaluate=evaluate)
    cost = {"params": n_params(model), "steps": result["steps"], "batch_size": cfg.batch_size,
            "accuracy": result["accuracy"], "wall_seconds": round(time.perf_counter() - t0, 1),
            "cpu_seconds": round(time.process_time() - c0, 1), "evals": evals}
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / "teacher_cost.json").write_text(json.dumps(cost, indent=2))
    return out


def teacher_cost(path: Path) -> dict:
    return json.loads((Path(path) / "teacher_cost.json").read_text())


if __name__ == "__main__":
    import torch

    from rlvr.tasks.arithmetic import ArithmeticTask

    torch.set_num_threads(1)
    print(build_teacher(ArithmeticTask(3, "+")))
