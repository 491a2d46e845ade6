"""The sections of `rlvr sft` and `rlvr eval`: frozen, flat, and loaded like the run config.

`load_command(cls, preset, flags, overrides)` builds `SftCommandConfig` or `EvalCommandConfig` from
an optional YAML preset (a flat mapping of the section's keys), then the values of the command's
flags (`--batch-size 4` is `batch_size=4`), then `key=value` overrides, so the last word wins.
Every key and value is checked like `Config`'s (types, each field's rule, an unknown key names
itself), then the section's combinations (`check_sft`, `check_eval`, pure functions of the
section). An error names a key as the user wrote it: `--steps` for a flag, `steps` otherwise.
Not checked here: that paths exist or a checkpoint loads (the commands do that before any work).
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Literal, Sequence

import yaml

from rlvr.config.loader import PRESETS, apply_overrides, build_section, parse_override, read_yaml
from rlvr.config.schema import above, at_least, between, rule
from rlvr.errors import ConfigError


@dataclass(frozen=True)
class SftCommandConfig:
    """`rlvr sft`: cold start from the built-in reasoner, SFT on JSONL pairs, or distillation."""

    out: str = rule("", bool, "a directory for the fine-tuned checkpoint (out=DIR or --out DIR)")
    model: str = "builtin:tiny-llama"   # student: checkpoint path or builtin:tiny-llama
    task: Literal["arithmetic", "agentic"] = "arithmetic"   # whose reasoner writes the traces
    data: str = ""                      # JSONL of {prompt, completion} rows
    teacher: str = ""                   # teacher checkpoint: keep its verified samples (distillation)
    problems: str = ""                  # with teacher: problems JSONL ("" : the built-in task)
    k: int = at_least(1, "an integer >= 1", 8)               # with teacher: samples per problem
    # with teacher: its sampling temperature and length (tokens per sample)
    teacher_temperature: float = above(0, "a number > 0", 1.0)
    teacher_max_new_tokens: int = at_least(1, "an integer >= 1", 48)
    num_problems: int = at_least(1, "an integer >= 1", 256)  # with teacher and the built-in task
    pool: int = 0                       # built-in task: a fixed pool of N traces (0: fresh)
    digits: int = 3
    ops: str = "+"
    steps: int = at_least(1, "an integer >= 1", 300)
    batch_size: int = at_least(1, "an integer >= 1", 64)
    lr: float = above(0, "a number > 0", 1e-3)
    warmup_steps: int = 50
    stop_accuracy: float = 0.0          # stop once held-out greedy accuracy (built-in task) reaches this
    tamper_share: float = between(0, 1, 0.0)   # task agentic: share of traces that empty the check instead
    seed: int = 0
    threads: int = 0
    device: str = "auto"                # auto | cpu | cuda | cuda:N (bf16 on a GPU)
    bf16_where_native: bool = False     # bf16 matrices on a CPU that computes bf16 natively (as model.*)


@dataclass(frozen=True)
class EvalCommandConfig:
    """`rlvr eval`: test-time compute of one checkpoint on held-out problems."""

    model: str = rule("", bool, "a checkpoint directory (e.g. runs/quickstart/final)")
    out: str = rule("", bool, "a directory for eval.json and plots (out=DIR or --out DIR)")
    data: str = ""                      # problems JSONL/parquet ("": the built-in task's held-out set)
    verifier: str = ""                  # default verifier for rows that name none
    n: int = at_least(1, "an integer >= 1", 500)            # number of held-out problems
    k: tuple[int, ...] = rule((1, 4, 16), lambda v: bool(v) and min(v) >= 1,
                              "positive integers, e.g. 1,4,16")   # pass@k / maj@k / mean@k
    samples: int = at_least(0, "an integer >= 0 (0: the largest k)", 0)   # samples per problem
    temperature: float = above(0, "a number > 0", 1.0)      # temperature of the k samples
    temperatures: tuple[float, ...] = rule((0.3, 0.6, 1.0, 1.3), lambda v: all(t > 0 for t in v),
                                           "numbers > 0 (empty: no sweep)")
    budgets: tuple[int, ...] | None = rule(None, lambda v: v is None or all(b >= 0 for b in v),
                                           "integers >= 0 (empty: no budget forcing)")   # None: sixths
    answer_marker: str = ">"            # appended when a budget cuts the thinking (\n: a newline)
    answer_tokens: int = at_least(1, "an integer >= 1", 8)  # tokens allowed for a forced answer
    max_new_tokens: int = at_least(1, "an integer >= 1", 48)
    digits: int = 3
    ops: str = "+"
    seed: int = 0
    threads: int = 0
    device: str = "auto"                # auto | cpu | cuda | cuda:N (bf16 on a GPU)
    # plain-text prompts (GSM8K's question, MAWPS's sQuestion) go in as one user message through the
    # tokenizer's chat template, as `model.chat_template_text` in training; an instruct model given
    # the bare text often answers nothing at all (SmolLM2-135M-Instruct: an empty answer to every
    # MAWPS problem)
    chat_template_text: bool = False


Label = Callable[[str], str]


def _required(cfg: Any, label: Label, key: str, example: str) -> None:
    # a rule checks only the values given; a key with no usable default is checked here
    if not getattr(cfg, key):
        raise ConfigError(f"{label(key)}: required, e.g. {example}")


def check_sft(cfg: SftCommandConfig, label: Label = str) -> None:
    _required(cfg, label, "out", "out=runs/sft or --out runs/sft")
    if cfg.task == "agentic" and (cfg.data or cfg.teacher):
        raise ConfigError(f"{label('task')} agentic: cannot be combined with {label('data')} or "
                          f"{label('teacher')}")
    if cfg.data and cfg.teacher:
        raise ConfigError(f"{label('data')} and {label('teacher')}: give one source of pairs")


def check_eval(cfg: EvalCommandConfig, label: Label = str) -> None:
    _required(cfg, label, "model", "rlvr eval runs/quickstart/final")
    _required(cfg, label, "out", "out=runs/eval or --out runs/eval")
    samples = cfg.samples or max(cfg.k)
    if samples < max(cfg.k):
        raise ConfigError(f"{label('samples')} {samples} is smaller than the largest k ({max(cfg.k)})")
    budgets = cfg.budgets is None or bool(cfg.budgets)
    if budgets and not cfg.answer_marker:
        raise ConfigError(f"{label('answer_marker')} must not be empty")


CHECKS: dict[type, Callable[[Any, Label], None]] = {SftCommandConfig: check_sft,
                                                    EvalCommandConfig: check_eval}


def load_command(cls: type, preset: str | Path | None, flags: dict[str, Any],
                 overrides: Sequence[str] = ()) -> Any:
    """`cls` from a preset, then flag values, then `key=value` overrides; checked whole."""
    data = read_yaml(preset, PRESETS / "commands") if preset else {}
    data.update(flags)
    data = apply_overrides(data, overrides)
    overridden = {parse_override(text)[0][0] for text in overrides}
    from_flags = set(flags) - overridden

    def label(key: str) -> str:
        return "--" + key.replace("_", "-") if key in from_flags else key

    cfg = build_section(cls, _lists(cls, data), label)
    CHECKS[cls](cfg, label)
    return cfg


def _lists(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    """Comma-separated text (`--k 1,4,16`, `k=1,4,16`) or one number for a list-valued key."""
    hints = typing.get_type_hints(cls)
    out = dict(data)
    for key, value in data.items():
        tp = hints.get(key)
        if tp is None or tuple not in {typing.get_origin(tp), *map(typing.get_origin, typing.get_args(tp))}:
            continue
        if isinstance(value, str):
            out[key] = [_scalar(part) for part in value.split(",") if part.strip()]
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out[key] = [value]
    return out


def _scalar(text: str) -> Any:
    try:
        return yaml.safe_load(text.strip())
    except yaml.YAMLError:
        return text.strip()
