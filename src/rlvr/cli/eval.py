"""`rlvr eval [PRESET|CHECKPOINT] key=value ...`: test-time compute on held-out problems, in one
command (`rlvr eval MODEL --out DIR` is the same: each flag is an alias of the key with its name).

Writes DIR/eval.json (greedy accuracy; pass@k, maj@k, mean@k for each k; a temperature sweep; a
budget-forcing curve; a vote curve; the per-problem correct counts the estimators used) and PNG
plots, and prints a table. Every key and flag is checked before the model loads
(`rlvr.config.commands.EvalCommandConfig` holds the keys and their rules); bad values are a
`UserError` (one line, exit status 2). Guaranteed: the same flags, model and data give the same
eval.json. Not guaranteed: budget forcing on engines other than the in-process HF one.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from rlvr.cli.dialect import SUPPRESS, given_flags, one_at_most, split_words
from rlvr.config.commands import EvalCommandConfig, load_command


@dataclass(frozen=True)
class EvalOptions:
    ks: tuple[int, ...]
    samples: int                      # n samples per problem (≥ max k)
    temperatures: tuple[float, ...]   # sweep; empty skips it
    budgets: tuple[int, ...]          # thinking budgets; empty skips budget forcing
    answer_marker: str
    answer_tokens: int


def _default_budgets(max_new_tokens: int) -> tuple[int, ...]:
    """Seven evenly spaced budgets from 0 (answer at once) to the generation limit."""
    return tuple(sorted({round(max_new_tokens * i / 6) for i in range(7)}))


def eval_config(args: argparse.Namespace) -> EvalCommandConfig:
    """The checked section from the preset, the checkpoint, the flags given and the overrides.
    A bare word ending in .yaml or .yml is the preset; any other bare word is the checkpoint."""
    bare, overrides = split_words(getattr(args, "words", []))
    preset = one_at_most("eval", "PRESET", [w for w in bare if Path(w).suffix in (".yaml", ".yml")])
    model = one_at_most("eval", "CHECKPOINT", [w for w in bare if Path(w).suffix not in (".yaml", ".yml")])
    flags = given_flags(args, EvalCommandConfig)
    return load_command(EvalCommandConfig, preset, {**({"model": model} if model else {}), **flags},
                        overrides)


def options(cfg: EvalCommandConfig) -> EvalOptions:
    """What the checked section implies: samples (default: the largest k), sorted ks and budgets
    (default: sixths of max_new_tokens), the marker with `\\n` read as a newline."""
    budgets = _default_budgets(cfg.max_new_tokens) if cfg.budgets is None else cfg.budgets
    return EvalOptions(tuple(sorted(set(cfg.k))), cfg.samples or max(cfg.k), cfg.temperatures,
                       tuple(sorted(set(budgets))), cfg.answer_marker.replace("\\n", "\n"),
                       cfg.answer_tokens)


def parse_options(args: argparse.Namespace) -> EvalOptions:
    """Validate every flag and key (raises UserError naming it) before anything loads."""
    return options(eval_config(args))


def add_arguments(p: argparse.ArgumentParser) -> None:
    """`rlvr eval [PRESET|CHECKPOINT] key=value ...`; each flag is an alias of the key with its
    name (`--max-new-tokens 6` is `max_new_tokens=6`). Keys, defaults, rules: `EvalCommandConfig`."""
    p.add_argument("words", nargs="*", metavar="[PRESET|CHECKPOINT] key=value",
                   help="a YAML file of the keys below and/or the checkpoint directory (e.g. "
                        "runs/quickstart/final), then overrides, e.g. k=1,4,16 out=runs/eval")
    d = SUPPRESS
    p.add_argument("--out", default=d, help="directory for eval.json and plots")
    p.add_argument("--data", default=d,
                   help="problems JSONL/parquet (default: the built-in task's held-out set)")
    p.add_argument("--verifier", default=d, help="default verifier for rows that name none")
    p.add_argument("--n", type=int, default=d, help="number of held-out problems (500)")
    p.add_argument("--k", default=d, help="k values for pass@k / maj@k / mean@k (1,4,16)")
    p.add_argument("--samples", type=int, default=d, help="samples per problem (default: max k)")
    p.add_argument("--temperature", type=float, default=d, help="temperature for the k samples (1.0)")
    p.add_argument("--temperatures", default=d,
                   help="temperature sweep (comma-separated; empty string skips it; 0.3,0.6,1.0,1.3)")
    p.add_argument("--budgets", default=d,
                   help="thinking-token budgets for budget forcing (default: 0..max-new-tokens "
                        "in sixths; empty string skips it)")
    p.add_argument("--answer-marker", default=d,
                   help="text appended when a budget cuts the thinking (\\n means newline), "
                        "e.g. '\\n\\boxed{' for math; default '>' is the built-in task's")
    p.add_argument("--answer-tokens", type=int, default=d, help="tokens allowed for a forced answer (8)")
    p.add_argument("--max-new-tokens", type=int, default=d, help="(48)")
    p.add_argument("--digits", type=int, default=d, help="built-in task: number of digits (3)")
    p.add_argument("--ops", default=d, help="built-in task: operators to draw from (+)")
    p.add_argument("--seed", type=int, default=d, help="(0)")
    p.add_argument("--threads", type=int, default=d, help="(0: 1 on <= 2 cores, else cores // 2)")
    p.add_argument("--device", default=d, help="auto | cpu | cuda | cuda:N (bf16 on a GPU)")
    p.add_argument("--chat-template-text", action="store_true", default=d,
                   help="plain-text prompts through the chat template, as one user message "
                        "(model.chat_template_text in training; instruct models need it)")


def load_eval_problems(args: EvalCommandConfig):
    from rlvr.data import check_references, load_problems
    from rlvr.tasks.base import build_verifiers
    from rlvr.tasks.arithmetic import ArithmeticTask

    if not args.data:
        problems = ArithmeticTask(args.digits, args.ops).heldout(args.n)
        return problems, build_verifiers({p.verifier for p in problems})
    problems = list(load_problems(args.data, args.verifier)[:args.n])
    verifiers = build_verifiers({p.verifier for p in problems})
    check_references(problems, verifiers)
    return problems, verifiers


def _load_engine(path: str, device_spec: str = "auto", template_text: bool = False):
    from rlvr.cli.sft import _device
    from rlvr.models.policy import load_policy
    from rlvr.rollout.hf import HFEngine

    device = _device(device_spec)   # load_policy resolves the names `rlvr train` takes (models/resolve.py)
    model, tokenizer = load_policy(path, device=device)
    return HFEngine(model, tokenizer, device=device, template_text=template_text)


def evaluate_all(engine, problems, verifiers, opts: EvalOptions, args: EvalCommandConfig) -> dict:
    """Every measurement of `rlvr eval`, as the dict written to eval.json."""
    from rlvr.evaluation.metrics import (correct_counts, greedy_accuracy, has_answers, sampled_metrics,
                                         vote_curve)
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
    greedy = greedy_accuracy(engine, problems, verifiers, args.max_new_tokens)
    result["greedy_accuracy"] = greedy["eval/accuracy"]
    result["greedy_mean_length"] = greedy["eval/mean_length"]
    if problems and greedy["eval/mean_length"] <= 1 and not args.chat_template_text \
            and any(isinstance(p.prompt, str) for p in problems):
        print("warning: the model's greedy answers are empty (the end token alone): its prompts are "
              "plain text and went in without the chat template; an instruct model needs "
              "--chat-template-text", file=sys.stderr)
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

    cfg = eval_config(args)
    opts = options(cfg)
    set_threads(cfg.threads)
    problems, verifiers = load_eval_problems(cfg)
    engine = _load_engine(cfg.model, cfg.device, cfg.chat_template_text)
    if opts.budgets:
        marker_ids(engine.tokenizer, opts.answer_marker)  # fail before minutes of sampling
    result = evaluate_all(engine, problems, verifiers, opts, cfg)
    out = Path(cfg.out)
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
