"""`rlvr eval MODEL --out DIR`: test-time compute on held-out problems, in one command.

Writes DIR/eval.json (greedy accuracy; pass@k, maj@k, mean@k for each k; a temperature sweep; a
budget-forcing curve; a vote curve; the per-problem correct counts the estimators used) and PNG
plots, and prints a table. Every flag is checked before the model loads; bad values are a
`UserError` (one line, exit status 2). Guaranteed: the same flags, model and data give the same
eval.json. Not guaranteed: budget forcing on engines other than the in-process HF one.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass
from pathlib import Path

from rlvr.errors import UserError


@dataclass(frozen=True)
class EvalOptions:
    ks: tuple[int, ...]
    samples: int                      # n samples per problem (≥ max k)
    temperatures: tuple[float, ...]   # sweep; empty skips it
    budgets: tuple[int, ...]          # thinking budgets; empty skips budget forcing
    answer_marker: str
    answer_tokens: int


def _split(flag: str, text: str, cast) -> tuple:
    try:
        return tuple(cast(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise UserError(f"{flag}: expected comma-separated {cast.__name__}s, got {text!r}")


def _default_budgets(max_new_tokens: int) -> tuple[int, ...]:
    """Seven evenly spaced budgets from 0 (answer at once) to the generation limit."""
    return tuple(sorted({round(max_new_tokens * i / 6) for i in range(7)}))


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise UserError(message)


def parse_options(args: argparse.Namespace) -> EvalOptions:
    """Validate every flag (raises UserError naming the flag) before anything loads."""
    ks = _split("--k", args.k, int)
    _check(bool(ks) and min(ks) >= 1, f"--k: expected positive integers, got {args.k!r}")
    samples = args.samples or max(ks)
    _check(samples >= max(ks), f"--samples {samples} is smaller than the largest k ({max(ks)})")
    temps = _split("--temperatures", args.temperatures, float)
    _check(args.temperature > 0 and all(t > 0 for t in temps),
           "--temperature and --temperatures must be > 0")
    _check(args.n >= 1 and args.max_new_tokens >= 1, "--n and --max-new-tokens must be >= 1")
    budgets = (_default_budgets(args.max_new_tokens) if args.budgets is None
               else _split("--budgets", args.budgets, int))
    _check(all(b >= 0 for b in budgets), f"--budgets must be >= 0, got {args.budgets!r}")
    _check(args.answer_tokens >= 1, "--answer-tokens must be >= 1")
    marker = args.answer_marker.replace("\\n", "\n")
    _check(bool(marker) or not budgets, "--answer-marker must not be empty")
    return EvalOptions(tuple(sorted(set(ks))), samples, tuple(temps), tuple(sorted(set(budgets))),
                       marker, args.answer_tokens)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="checkpoint directory (e.g. runs/quickstart/final)")
    p.add_argument("--out", required=True, help="directory for eval.json and plots")
    p.add_argument("--data", help="problems JSONL/parquet (default: the built-in task's held-out set)")
    p.add_argument("--verifier", default="", help="default verifier for rows that name none")
    p.add_argument("--n", type=int, default=500, help="number of held-out problems")
    p.add_argument("--k", default="1,4,16", help="k values for pass@k / maj@k / mean@k")
    p.add_argument("--samples", type=int, default=0, help="samples per problem (default: max k)")
    p.add_argument("--temperature", type=float, default=1.0, help="temperature for the k samples")
    p.add_argument("--temperatures", default="0.3,0.6,1.0,1.3",
                   help="temperature sweep (comma-separated; empty string skips it)")
    p.add_argument("--budgets", default=None,
                   help="thinking-token budgets for budget forcing (default: 0..max-new-tokens "
                        "in sixths; empty string skips it)")
    p.add_argument("--answer-marker", default=">",
                   help="text appended when a budget cuts the thinking (\\n means newline), "
                        "e.g. '\\n\\boxed{' for math; default '>' is the built-in task's")
    p.add_argument("--answer-tokens", type=int, default=8, help="tokens allowed for a forced answer")
    p.add_argument("--max-new-tokens", type=int, default=48)
    p.add_argument("--digits", type=int, default=3)
    p.add_argument("--ops", default="+")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N (bf16 on a GPU)")


def load_eval_problems(args):
    from rlvr.data import check_references, load_problems
    from rlvr.training.setup import build_verifiers
    from rlvr.tasks.arithmetic import ArithmeticTask

    if not args.data:
        problems = ArithmeticTask(args.digits, args.ops).heldout(args.n)
        return problems, build_verifiers({p.verifier for p in problems})
    problems = load_problems(args.data, args.verifier)[:args.n]
    verifiers = build_verifiers({p.verifier for p in problems})
    check_references(problems, verifiers)
    return problems, verifiers


def _load_engine(path: str, device_spec: str = "auto"):
    from rlvr.cli.sft import _device
    from rlvr.models.policy import BUILTIN_TINY, load_policy
    from rlvr.rollout.hf import HFEngine

    if path != BUILTIN_TINY and not Path(path).exists():
        raise UserError(f"model: {path} does not exist")
    device = _device(device_spec)
    model, tokenizer = load_policy(path, device=device)
    return HFEngine(model, tokenizer, device=device)


def evaluate_all(engine, problems, verifiers, opts: EvalOptions, args) -> dict:
    """Every measurement of `rlvr eval`, as the dict written to eval.json."""
    from rlvr.evaluation.metrics import correct_counts, greedy_accuracy, has_answers, sampled_metrics, vote_curve
    from rlvr.evaluation.ttc import budget_curve, sample_groups, temperature_sweep

    cache: dict[float, list] = {}

    def sample(t: float) -> list:
        if t not in cache:
            cache[t] = sample_groups(engine, problems, verifiers, opts.samples, t,
                                     args.max_new_tokens, args.seed)
        return cache[t]

    groups = sample(args.temperature)
    result = {"model": str(args.model), "data": args.data or f"builtin:arithmetic/{args.digits}"
              f"{args.ops}", "n_problems": len(problems), "seed": args.seed,
              "max_new_tokens": args.max_new_tokens, "temperature": args.temperature,
              **{k: v for k, v in asdict(opts).items() if k not in ("ks", "samples")},
              "k": list(opts.ks), "n_samples": opts.samples}
    result["greedy_accuracy"] = greedy_accuracy(engine, problems, verifiers,
                                                args.max_new_tokens)["eval/accuracy"]
    result.update(sampled_metrics(groups, opts.ks, args.seed))
    result["answers_extracted"] = has_answers(groups)
    result["vote_curve"] = vote_curve(groups, args.seed)
    result["temperature_sweep"] = temperature_sweep(sample, opts.temperatures, opts.ks, args.seed)
    result["budget_curve"] = (budget_curve(engine, problems, verifiers, opts.budgets,
                                           opts.answer_marker, opts.answer_tokens, args.seed)
                              if opts.budgets else [])
    result["samples"] = {"n": [len(g.completions) for g in groups],
                         "correct": correct_counts(groups), "ids": [p.id for p in problems]}
    return result


def write_plots(result: dict, out: Path) -> list[str]:
    from rlvr.report.ttc_plots import budget_plot, temperature_plot, vote_plot

    charts = {"vote_curve.png": (vote_plot, result["vote_curve"]),
              "temperature_sweep.png": (temperature_plot, result["temperature_sweep"]),
              "budget_curve.png": (budget_plot, result["budget_curve"])}
    written = []
    for name, (draw, rows) in charts.items():
        if rows:
            (out / name).write_bytes(draw(rows))
            written.append(name)
    return written


def run_eval(args: argparse.Namespace) -> int:
    from rlvr.training.setup import set_threads
    from rlvr.evaluation.ttc import marker_ids

    opts = parse_options(args)
    set_threads(args.threads)
    problems, verifiers = load_eval_problems(args)
    engine = _load_engine(args.model, args.device)
    if opts.budgets:
        marker_ids(engine.tokenizer, opts.answer_marker)  # fail before minutes of sampling
    result = evaluate_all(engine, problems, verifiers, opts, args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    result["plots"] = write_plots(result, out)
    (out / "eval.json").write_text(json.dumps(result, indent=2))
    print_tables(result)
    print(f"wrote {out / 'eval.json'} and {', '.join(result['plots']) or 'no plots'}")
    return 0


def _fmt(value) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def _table(title: str, columns: list[str], rows: list[list]):
    from rich.table import Table

    table = Table(title=title)
    for i, name in enumerate(columns):
        table.add_column(name, justify="left" if i == 0 else "right")
    for row in rows:
        table.add_row(*(_fmt(v) for v in row))
    return table


def print_tables(result: dict) -> None:
    """Headline metrics (one row per metric, one column per k), the temperature sweep (pass@k
    for every k, maj@ the largest k), the budget curve and the vote curve, as rich tables."""
    from rich.console import Console

    console, ks = Console(), result["k"]
    rows = [[m] + [result.get(f"{m}@{k}", "-") for k in ks] for m in ("pass", "maj", "mean")]
    console.print(_table(f"{result['model']}: {result['n_problems']} problems, "
                         f"greedy accuracy {result['greedy_accuracy']:.3f}",
                         ["metric"] + [f"k={k}" for k in ks], rows))
    sweep_keys = [f"pass@{k}" for k in ks] + [f"maj@{ks[-1]}"]
    if result["temperature_sweep"]:
        console.print(_table("temperature sweep", ["temperature"] + sweep_keys,
                             [[r["temperature"]] + [r.get(k, "-") for k in sweep_keys]
                              for r in result["temperature_sweep"]]))
    for title, rows in (("budget forcing", result["budget_curve"]), ("votes", result["vote_curve"])):
        if rows:
            console.print(_table(title, list(rows[0]), [list(r.values()) for r in rows]))
