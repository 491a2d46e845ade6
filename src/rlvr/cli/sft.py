"""`rlvr sft`: cold start from the built-in reasoner, SFT on JSONL pairs, or teacher distillation."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rlvr.errors import UserError


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="builtin:tiny-llama", help="student: checkpoint path or builtin:tiny-llama")
    p.add_argument("--out", required=True, help="directory for the fine-tuned checkpoint")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--task", default="arithmetic",
                     help="built-in task whose reasoner writes the traces: arithmetic | agentic (episodes)")
    src.add_argument("--data", help="JSONL of {prompt, completion} rows")
    src.add_argument("--teacher", help="teacher checkpoint: keep its verified samples (distillation)")
    p.add_argument("--problems", help="with --teacher: problems JSONL (default: the built-in task)")
    p.add_argument("--k", type=int, default=8, help="with --teacher: samples per problem")
    p.add_argument("--num-problems", type=int, default=256, help="with --teacher and the built-in task")
    p.add_argument("--pool", type=int, default=0, help="with --task: a fixed pool of N traces (0: fresh)")
    p.add_argument("--digits", type=int, default=3)
    p.add_argument("--ops", default="+")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--warmup-steps", type=int, default=50)
    p.add_argument("--stop-accuracy", type=float, default=0.0,
                   help="stop once held-out greedy accuracy (built-in task) reaches this")
    p.add_argument("--tamper-share", type=float, default=0.0,
                   help="with --task agentic: share of traces that empty the check instead (experiments/tamper.py)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N (bf16 on a GPU)")


def _check(args: argparse.Namespace) -> None:
    for name in ("steps", "batch_size", "k", "num_problems"):
        if getattr(args, name) < 1:
            raise UserError(f"--{name.replace('_', '-')}: must be >= 1 (got {getattr(args, name)})")
    if args.lr <= 0:
        raise UserError(f"--lr: must be > 0 (got {args.lr})")
    for name in ("data", "teacher", "problems"):
        value = getattr(args, name)
        if value and not Path(value).exists():
            raise UserError(f"--{name}: {value} does not exist")
    if args.task and args.task not in ("arithmetic", "agentic"):
        raise UserError(f"--task: unknown task {args.task!r}; known: arithmetic, agentic")
    if not 0 <= args.tamper_share <= 1:
        raise UserError(f"--tamper-share: must be in [0, 1] (got {args.tamper_share})")
    if args.task == "agentic" and (args.data or args.teacher):
        raise UserError("--task agentic: cannot be combined with --data or --teacher")


def run_sft(args: argparse.Namespace) -> int:
    _check(args)
    if args.task == "agentic" and not args.data and not args.teacher:
        return run_agentic_sft(args)
    from rlvr.models.policy import load_policy
    from rlvr.training.setup import set_threads
    from rlvr.training.sft import SFTConfig, sft, task_probe
    from rlvr.tasks.arithmetic import ArithmeticTask

    set_threads(args.threads)
    device = _device(args.device)
    task = ArithmeticTask(args.digits, args.ops)
    model, tokenizer = load_policy(args.model, seed=args.seed, device=device)
    batches = _batches(args, task, tokenizer, device)
    evaluate = task_probe(model, tokenizer, task, device=device, report=lambda step, acc: print(
        f"sft step {step}: held-out accuracy {acc:.1%}", flush=True))

    cfg = SFTConfig(steps=args.steps, batch_size=args.batch_size, lr=args.lr,
                    warmup_steps=args.warmup_steps, stop_accuracy=args.stop_accuracy, seed=args.seed)
    use_eval = args.data is None
    result = sft(model, tokenizer, batches, cfg, evaluate=evaluate if use_eval else None, device=device)
    out = Path(args.out)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / "sft_summary.json").write_text(json.dumps(result, indent=2))
    print(f"saved {out} after {result['steps']} steps (loss {result['loss']:.4f})")
    return 0


def run_agentic_sft(args: argparse.Namespace) -> int:
    """Cold start for `data.task: agentic`: masked SFT on the reasoner's episodes (tool calls and
    the observations a workspace answers), in the layout `rlvr train` samples. From
    builtin:tiny-llama the tiny model is built with the task's extra characters (tool names)."""
    from rlvr.agents.cold_start import reasoner_batches
    from rlvr.models.policy import BUILTIN_TINY, load_policy
    from rlvr.models.tiny import CHARS, build_model
    from rlvr.tasks.agentic import EXTRA_CHARS, AgenticTask
    from rlvr.training.setup import set_threads
    from rlvr.training.sft import sft_episodes

    set_threads(args.threads)
    if args.model == BUILTIN_TINY:
        model, tokenizer = build_model(args.seed, chars=CHARS + list(EXTRA_CHARS))
    else:
        model, tokenizer = load_policy(args.model, seed=args.seed)
    task = AgenticTask(args.digits)
    losses = sft_episodes(model, tokenizer.pad_token_id,
                          reasoner_batches(task, tokenizer, args.batch_size, args.seed, args.tamper_share),
                          args.steps, lr=args.lr, log=lambda line: print(line, flush=True))
    out = Path(args.out)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    result = {"steps": args.steps, "loss": losses[-1], "task": "agentic", "tamper_share": args.tamper_share}
    (out / "sft_summary.json").write_text(json.dumps(result, indent=2))
    print(f"saved {out} after {args.steps} steps (loss {losses[-1]:.4f})")
    return 0


def _device(spec: str):
    from rlvr.models.device import Device

    try:
        return Device.resolve(spec)
    except ValueError as exc:
        raise UserError(f"--device: {exc}") from None


def _batches(args, task, tokenizer, device):
    import random

    from rlvr.training.sft import distill_pairs, jsonl_pairs, task_pairs

    if args.data:
        return jsonl_pairs(args.data, tokenizer, args.batch_size, args.seed)
    if not args.teacher:
        return task_pairs(task, tokenizer, args.batch_size, args.seed, pool=args.pool)
    from rlvr.models.policy import load_policy
    from rlvr.rollout.base import SamplingParams
    from rlvr.rollout.hf import HFEngine
    from rlvr.training.setup import build_verifiers
    from rlvr.data import load_problems

    teacher, teacher_tok = load_policy(args.teacher, device=device)
    if args.problems:
        problems = load_problems(args.problems, "arithmetic")
    else:
        problems = task.sample(random.Random(args.seed), args.num_problems)
    verifiers = build_verifiers({p.verifier for p in problems})
    pairs = distill_pairs(HFEngine(teacher, teacher_tok, device=device), tokenizer, problems, verifiers, args.k,
                          SamplingParams(temperature=1.0, max_new_tokens=48))
    print(f"distillation: kept {len(pairs)} of {len(problems) * args.k} teacher samples")
    if not pairs:
        raise UserError("--teacher: the verifier passed none of the teacher's samples")
    rng = random.Random(args.seed)

    def gen():
        while True:
            yield [rng.choice(pairs) for _ in range(args.batch_size)]
    return gen()
