"""`rlvr sft [PRESET] key=value ...`: cold start from the built-in reasoner, SFT on JSONL pairs,
or teacher distillation. Every flag (`--out`, `--data`, `--steps`, ...) is an alias of the key with
its name; keys and their rules are `rlvr.config.commands.SftCommandConfig`. Every value and path
is checked before a model loads (one line, exit status 2)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rlvr.cli.dialect import SUPPRESS, given_flags, one_at_most, split_words
from rlvr.config.commands import SftCommandConfig, load_command
from rlvr.errors import UserError


def add_arguments(p: argparse.ArgumentParser) -> None:
    """`rlvr sft [PRESET] key=value ...`; each flag is an alias of the key with its name
    (`--batch-size 4` is `batch_size=4`). Keys, defaults and rules: `SftCommandConfig`."""
    p.add_argument("words", nargs="*", metavar="[PRESET] key=value",
                   help="a YAML file of the keys below, then overrides, e.g. steps=300 out=runs/sft")
    d = SUPPRESS
    p.add_argument("--model", default=d, help="student: checkpoint path or builtin:tiny-llama")
    p.add_argument("--out", default=d, help="directory for the fine-tuned checkpoint (key: out)")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--task", default=d,
                     help="built-in task whose reasoner writes the traces: arithmetic | agentic (episodes)")
    src.add_argument("--data", default=d, help="JSONL of {prompt, completion} rows")
    src.add_argument("--teacher", default=d,
                     help="teacher checkpoint: keep its verified samples (distillation)")
    p.add_argument("--problems", default=d,
                   help="with --teacher: problems JSONL (default: the built-in task)")
    p.add_argument("--k", type=int, default=d, help="with --teacher: samples per problem (8)")
    p.add_argument("--teacher-temperature", type=float, default=d,
                   help="with --teacher: its sampling temperature (1.0)")
    p.add_argument("--teacher-max-new-tokens", type=int, default=d,
                   help="with --teacher: tokens per sample (48)")
    p.add_argument("--num-problems", type=int, default=d, help="with --teacher and the built-in task (256)")
    p.add_argument("--pool", type=int, default=d, help="with --task: a fixed pool of N traces (0: fresh)")
    p.add_argument("--digits", type=int, default=d, help="built-in task: number of digits (3)")
    p.add_argument("--ops", default=d, help="built-in task: operators to draw from (+)")
    p.add_argument("--steps", type=int, default=d, help="(300)")
    p.add_argument("--batch-size", type=int, default=d, help="(64)")
    p.add_argument("--lr", type=float, default=d, help="(1e-3)")
    p.add_argument("--warmup-steps", type=int, default=d, help="(50)")
    p.add_argument("--stop-accuracy", type=float, default=d,
                   help="stop once held-out greedy accuracy (built-in task) reaches this")
    p.add_argument("--tamper-share", type=float, default=d,
                   help="with --task agentic: share of traces that empty the check instead "
                        "(experiments/tamper.py)")
    p.add_argument("--seed", type=int, default=d, help="(0)")
    p.add_argument("--threads", type=int, default=d, help="(0: 1 on <= 2 cores, else cores // 2)")
    p.add_argument("--device", default=d, help="auto | cpu | cuda | cuda:N (bf16 on a GPU)")
    p.add_argument("--bf16-where-native", action="store_const", const=True, default=d,
                   help="bf16 matrices (fp32 weights) on a CPU that computes bf16 natively "
                        "(avx512_bf16, amx_bf16); float32 elsewhere, as model.bf16_where_native in training")
    _show_defaults(p)


def _show_defaults(p: argparse.ArgumentParser) -> None:
    """Append each key's default to its flag's help (the flags default to "unset", so argparse's
    own %(default)s would print ==SUPPRESS==)."""
    import dataclasses

    defaults = {f.name: f.default for f in dataclasses.fields(SftCommandConfig)}
    for action in p._actions:
        if action.dest in defaults and action.help and "default" not in action.help:
            value = defaults[action.dest]
            shown = repr(value) if value == "" else str(value)
            help_text = action.help.removesuffix(f"({shown})").strip()   # "... (300)": said below
            action.help = f"{help_text} (default: {shown})".strip()


def sft_config(args: argparse.Namespace) -> SftCommandConfig:
    """The checked section from the preset, the flags given and the overrides."""
    bare, overrides = split_words(getattr(args, "words", []))
    preset = one_at_most("sft", "PRESET", bare)
    return load_command(SftCommandConfig, preset, given_flags(args, SftCommandConfig), overrides)


def _check_paths(cfg: SftCommandConfig, args: argparse.Namespace) -> None:
    for name in ("data", "teacher", "problems"):
        value = getattr(cfg, name)
        if value and not Path(value).exists():   # named as given: --data for the flag, else data
            dashes = "--" if getattr(args, name, None) == value else ""
            raise UserError(f"{dashes}{name}: {value} does not exist")


def run_sft(args: argparse.Namespace) -> int:
    cfg = sft_config(args)
    _check_paths(cfg, args)
    if cfg.task == "agentic" and not cfg.data and not cfg.teacher:
        return run_agentic_sft(cfg)
    from rlvr.models.policy import load_policy
    from rlvr.training.setup import set_threads
    from rlvr.training.sft import SFTConfig, sft, task_probe
    from rlvr.tasks.arithmetic import ArithmeticTask

    set_threads(cfg.threads)
    device = _device(cfg.device, cfg.bf16_where_native)
    task = ArithmeticTask(cfg.digits, cfg.ops)
    model, tokenizer = load_policy(cfg.model, seed=cfg.seed, device=device)
    batches = _batches(cfg, task, tokenizer, device)
    evaluate = task_probe(model, tokenizer, task, device=device, report=lambda step, acc: print(
        f"sft step {step}: held-out accuracy {acc:.1%}", flush=True))

    plan = SFTConfig(steps=cfg.steps, batch_size=cfg.batch_size, lr=cfg.lr,
                     warmup_steps=cfg.warmup_steps, stop_accuracy=cfg.stop_accuracy, seed=cfg.seed)
    use_eval = not cfg.data
    every = max(1, cfg.steps // 20)   # about 20 loss lines a run, and the last step

    def log(record: dict) -> None:
        if record["sft_step"] % every == 0 or record["sft_step"] == cfg.steps:
            print(f"sft step {record['sft_step']}/{cfg.steps}: loss {record['sft/loss']:.4f}", flush=True)
    result = sft(model, tokenizer, batches, plan, evaluate=evaluate if use_eval else None, log=log,
                 device=device)
    out = Path(cfg.out)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / "sft_summary.json").write_text(json.dumps(result, indent=2))
    print(f"saved {out} after {result['steps']} steps (loss {result['loss']:.4f})")
    return 0


def run_agentic_sft(cfg: SftCommandConfig) -> int:
    """Cold start for `data.task: agentic`: masked SFT on the reasoner's episodes (tool calls and
    the observations a workspace answers), in the layout `rlvr train` samples. From
    builtin:tiny-llama the tiny model is built with the task's extra characters (tool names)."""
    from rlvr.agents.cold_start import reasoner_batches
    from rlvr.models.policy import BUILTIN_TINY, load_policy
    from rlvr.models.tiny import CHARS, build_model
    from rlvr.tasks.agentic import EXTRA_CHARS, AgenticTask
    from rlvr.training.setup import set_threads
    from rlvr.training.sft import sft_episodes

    set_threads(cfg.threads)
    if cfg.model == BUILTIN_TINY:
        model, tokenizer = build_model(cfg.seed, chars=CHARS + list(EXTRA_CHARS))
    else:
        model, tokenizer = load_policy(cfg.model, seed=cfg.seed)
    task = AgenticTask(cfg.digits)
    losses = sft_episodes(model, tokenizer.pad_token_id,
                          reasoner_batches(task, tokenizer, cfg.batch_size, cfg.seed, cfg.tamper_share),
                          cfg.steps, lr=cfg.lr, log=lambda line: print(line, flush=True))
    out = Path(cfg.out)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    result = {"steps": cfg.steps, "loss": losses[-1], "task": "agentic", "tamper_share": cfg.tamper_share}
    (out / "sft_summary.json").write_text(json.dumps(result, indent=2))
    print(f"saved {out} after {cfg.steps} steps (loss {losses[-1]:.4f})")
    return 0


def _device(spec: str, bf16_where_native: bool = False):
    from rlvr.models.device import Device

    try:
        return Device.resolve(spec, bf16_where_native=bf16_where_native)
    except ValueError as exc:
        raise UserError(f"--device: {exc}") from None


def _batches(cfg: SftCommandConfig, task, tokenizer, device):
    import random

    from rlvr.training.sft import distill_pairs, jsonl_pairs, task_pairs

    if cfg.data:
        return jsonl_pairs(cfg.data, tokenizer, cfg.batch_size, cfg.seed)
    if not cfg.teacher:
        return task_pairs(task, tokenizer, cfg.batch_size, cfg.seed, pool=cfg.pool)
    from rlvr.models.policy import load_policy
    from rlvr.rollout.base import SamplingParams
    from rlvr.rollout.hf import HFEngine
    from rlvr.tasks.base import build_verifiers
    from rlvr.data import load_problems

    teacher, teacher_tok = load_policy(cfg.teacher, device=device)
    if cfg.problems:
        problems = load_problems(cfg.problems, "arithmetic")
    else:
        problems = task.sample(random.Random(cfg.seed), cfg.num_problems)
    verifiers = build_verifiers({p.verifier for p in problems})
    teacher_engine = HFEngine(teacher, teacher_tok, device=device)
    pairs = distill_pairs(teacher_engine, tokenizer, problems, verifiers, cfg.k,
                          SamplingParams(temperature=cfg.teacher_temperature,
                                         max_new_tokens=cfg.teacher_max_new_tokens))
    print(f"distillation: kept {len(pairs)} of {len(problems) * cfg.k} teacher samples")
    if not pairs:
        raise UserError("--teacher: the verifier passed none of the teacher's samples")
    rng = random.Random(cfg.seed)

    def gen():
        while True:
            yield [rng.choice(pairs) for _ in range(cfg.batch_size)]
    return gen()
