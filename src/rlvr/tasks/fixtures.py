"""Small cold-start checkpoints for tests and benchmarks, built from the built-in task."""

from __future__ import annotations

from pathlib import Path


def make_cold_start(path: str | Path, digits: int = 2, steps: int = 400, seed: int = 0,
                    batch_size: int = 64, ops: str = "+", stop_accuracy: float = 0.15,
                    eval_every: int = 10, say=None) -> Path:
    """Random tiny Llama + SFT on reasoner traces until a 100-problem held-out probe reaches
    `stop_accuracy` (checked every `eval_every` steps) or `steps` run out; saved as a HF checkpoint."""
    from rlvr.policy import load_policy
    from rlvr.sft import SFTConfig, sft, task_pairs, task_probe
    from rlvr.tasks.arithmetic import ArithmeticTask

    path = Path(path)
    model, tokenizer = load_policy("builtin:tiny-llama", seed=seed)
    task = ArithmeticTask(digits, ops)
    report = (lambda step, acc: say(f"cold start step {step}: probe accuracy {acc:.0%}")) if say else None
    evaluate = task_probe(model, tokenizer, task, n=100, max_new_tokens=10 * digits + 8, report=report)

    cfg = SFTConfig(steps=steps, batch_size=batch_size, warmup_steps=min(50, steps // 3), seed=seed,
                    eval_every=eval_every, stop_accuracy=stop_accuracy)
    sft(model, tokenizer, task_pairs(task, tokenizer, batch_size, seed), cfg,
        evaluate=evaluate if stop_accuracy else None)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
