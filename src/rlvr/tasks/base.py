"""The `Task` protocol and the registry that maps `data.task` names to task builders.

A task draws problems (`sample`, `heldout`) and says, through the protocol and nothing else, what
the run needs from it: the verifiers its problems name, a finite training pool (or [] to draw
fresh), whether it plays multi-turn episodes (then its engine must continue token ids), how it
wraps the run's engine (itself, for one-turn tasks), and a tokenizer check that runs before any
file is written. Builders are registered lazily ("module:attr" strings, as verifiers are in
`rlvr.verifiers.base`), so importing the registry imports no task, and `rlvr.training` never names
the packages (`rlvr.agents`) whose tasks it runs. A name is looked up once, at build time: an exact
name (`arithmetic`, `agentic`), or a family before the first colon (`reasoning_gym:SPEC`,
`verifiers:SPEC`), whose builder reads the whole name.
"""

from __future__ import annotations

import importlib
import random
from typing import Any, Callable, Mapping, Protocol

from rlvr.errors import ConfigError
from rlvr.types import Problem
from rlvr.verifiers.base import get_verifier, verifier_names, verifier_options


class Task(Protocol):
    plays_episodes: bool    # completions are episodes: the engine needs `continue_ids`

    def sample(self, rng: random.Random, n: int, split: str = "train") -> list[Problem]:
        """n problems from `split` ("train" or "heldout"), drawn with `rng`."""
        ...

    def heldout(self, n: int, seed: int = 1234) -> list[Problem]:
        """A fixed held-out set of n problems."""
        ...

    def verifiers(self) -> dict[str, Any]:
        """One verifier for every name its problems carry in `Problem.verifier`."""
        ...

    def train_problems(self) -> list[Problem]:
        """A finite training pool drawn in epochs, or [] when training draws come from `sample`."""
        ...

    def wrap_engine(self, engine, tokenizer):
        """The engine the run samples with: `engine` itself, or one that plays episodes over it."""
        ...

    def check_tokenizer(self, tokenizer) -> Any:
        """ConfigError when this task cannot run with `tokenizer` (called before any file is written)."""
        ...


TaskBuilder = Callable[[Any], Task]     # built from the whole `Config`

_NAMED: dict[str, str | TaskBuilder] = {
    "arithmetic": "rlvr.tasks.arithmetic:from_config",
    "agentic": "rlvr.agents.runtime:from_config",
    "word_problems": "rlvr.tasks.word_problems:from_config",
}
_FAMILIES: dict[str, str | TaskBuilder] = {
    "reasoning_gym": "rlvr.tasks.rgym:from_config",
    "verifiers": "rlvr.agents.vftask:from_config",
}


def register_task(name: str, builder: str | TaskBuilder, family: bool = False) -> None:
    """Register a builder `f(cfg) -> Task` (or its "module:attr" path) under an exact name, or,
    with `family`, for every `data.task` of the form `NAME:...`."""
    (_FAMILIES if family else _NAMED)[name] = builder


def build_task(cfg) -> Task:
    """The task `cfg.data.task` names; ConfigError listing the known names otherwise."""
    name = cfg.data.task
    builder = _NAMED.get(name)
    if builder is None and ":" in name:
        builder = _FAMILIES.get(name.partition(":")[0])
    if builder is None:
        raise ConfigError(f"invalid value {name!r} for data.task; allowed: {', '.join(_NAMED)}, "
                          "reasoning_gym:NAME[=WEIGHT],..., verifiers:module:function, "
                          "or '' with data.train_path")
    if isinstance(builder, str):
        module, _, attr = builder.partition(":")
        builder = getattr(importlib.import_module(module), attr)
    return builder(cfg)


def build_verifiers(names: set[str], options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One verifier per name, built with `options[name]` as keyword options."""
    options = options or {}
    unknown = sorted(set(options) - set(verifier_names()))
    if unknown:
        raise ConfigError(f"data.verifier_options: unknown verifier {unknown[0]!r}; known: "
                          f"{', '.join(verifier_names())}")
    verifiers = {}
    for name in sorted(names):
        if name not in verifier_names():
            raise ConfigError(f"unknown verifier {name!r}; known: {', '.join(verifier_names())}")
        opts = options.get(name) or {}
        if not isinstance(opts, dict):
            raise ConfigError(f"data.verifier_options.{name} must be a mapping of options")
        valid = verifier_options(name)
        unknown_opts = sorted(set(opts) - set(valid)) if valid is not None else []
        if unknown_opts:   # before building: a TypeError would name __init__, not the key
            raise ConfigError(f"data.verifier_options.{name}.{unknown_opts[0]}: unknown option; "
                              f"{name} takes: {', '.join(valid or []) or 'no options'}")
        try:
            verifiers[name] = get_verifier(name, **opts)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"data.verifier_options.{name}: {exc}") from None
    return verifiers
