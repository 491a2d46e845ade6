"""`rlvr eval MODEL --out DIR`: greedy accuracy, pass@k / maj@k / mean@k on held-out problems."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rlvr.errors import UserError


def _ints(text: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}")
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="checkpoint directory (e.g. runs/quickstart/final)")
    p.add_argument("--out", required=True, help="directory for eval.json and plots")
    p.add_argument("--data", help="problems JSONL/parquet (default: the built-in task's held-out set)")
    p.add_argument("--verifier", default="", help="default verifier for rows that name none")
    p.add_argument("--n", type=int, default=500, help="number of held-out problems")
    p.add_argument("--k", type=_ints, default=[1, 4, 16], help="k values for pass@k / maj@k")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--max-new-tokens", type=int, default=48)
    p.add_argument("--digits", type=int, default=3)
    p.add_argument("--ops", default="+")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0)


def load_eval_problems(args):
    from rlvr.data import load_problems
    from rlvr.setup import build_verifiers
    from rlvr.tasks.arithmetic import ArithmeticTask

    if args.data:
        problems = load_problems(args.data, args.verifier)[:args.n]
    else:
        problems = ArithmeticTask(args.digits, args.ops).heldout(args.n)
    return problems, build_verifiers({p.verifier for p in problems})


def run_eval(args: argparse.Namespace) -> int:
    if not Path(args.model).exists():
        raise UserError(f"model: {args.model} does not exist")
    if args.temperature <= 0 or args.n < 1:
        raise UserError("--temperature must be > 0 and --n >= 1")
    from rlvr.evaluate import greedy_accuracy, sampled_metrics, score_groups
    from rlvr.policy import load_policy
    from rlvr.rollout.base import SamplingParams
    from rlvr.rollout.hf import HFEngine
    from rlvr.setup import set_threads

    set_threads(args.threads)
    problems, verifiers = load_eval_problems(args)
    model, tokenizer = load_policy(args.model)
    engine = HFEngine(model, tokenizer)
    result = {"model": str(args.model), "n_problems": len(problems)}
    result["greedy_accuracy"] = greedy_accuracy(engine, problems, verifiers, args.max_new_tokens)["eval/accuracy"]
    n = max(args.k)
    groups = engine.generate(problems, n, SamplingParams(args.temperature, 1.0, args.max_new_tokens), args.seed)
    score_groups(groups, verifiers)
    result.update(sampled_metrics(groups, args.k))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "eval.json").write_text(json.dumps(result, indent=2))
    for key, value in result.items():
        print(f"{key:>18}: {value:.4f}" if isinstance(value, float) else f"{key:>18}: {value}")
    return 0
