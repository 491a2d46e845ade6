"""The optional extras a config needs, checked before a run writes anything.

Each entry says which `pyproject.toml` extra provides which module and which config value needs
it; an engine's own packages are in its row of the engine table (`rlvr.rollout.engines`).
`check_extras(cfg)` raises `ConfigError` (exit status 2) for the first one the config needs and
Python cannot find, naming the key and the install line that works from a checkout
(`pip install -e '.[EXTRA]'`). Guaranteed: nothing is imported, only looked up (importlib's
find_spec), so the check is cheap and a broken package fails later, where it is used.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any, Callable

from rlvr.config import Config
from rlvr.errors import ConfigError


@dataclass(frozen=True)
class Extra:
    extra: str                       # the pyproject extra
    module: str                      # what it makes importable
    key: Callable[[Config], Any]     # (config key, value) when the config needs it, else None
    hint: str = ""


def _tracker(name: str) -> Callable[[Config], Any]:
    return lambda cfg: ("run.trackers", name) if name in cfg.run.trackers else None


def _task(prefix: str) -> Callable[[Config], Any]:
    return lambda cfg: ("data.task", cfg.data.task) if cfg.data.task.startswith(prefix) else None


EXTRAS = (
    Extra("lora", "peft", lambda cfg: ("model.lora.r", cfg.model.lora.r) if cfg.model.lora.r > 0 else None),
    Extra("gym", "reasoning_gym", _task("reasoning_gym:")),
    Extra("verifiers", "verifiers", _task("verifiers:")),
    Extra("wandb", "wandb", _tracker("wandb")),
    Extra("mlflow", "mlflow", _tracker("mlflow")),
    Extra("trackio", "trackio", _tracker("trackio")),
)


def importable(module: str) -> bool:
    """Whether `import module` can find it (a bare directory without code does not count)."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return False
    return spec is not None and spec.origin is not None


def engine_extras(row) -> tuple[Extra, ...]:
    """The optional packages of one engine-table row (`rlvr.rollout.engines`), as `Extra`s."""
    return tuple(Extra(p.extra, p.module, _setting_of(p.key), p.hint) for p in row.extras)


def _setting_of(key: str) -> Callable[[Config], Any]:
    section, _, name = key.partition(".")

    def need(cfg: Config) -> Any:
        value = getattr(getattr(cfg, section), name)
        return (key, value) if value else None
    return need


def check_extras(cfg: Config, found: Callable[[str], bool] = importable) -> None:
    from rlvr.rollout.engines import engine_row

    for e in EXTRAS + engine_extras(engine_row(cfg.rollout.engine)):
        need = e.key(cfg)
        if need is not None and not found(e.module):
            key, value = need
            raise ConfigError(f"{key}={value!r} needs the {e.module} package, which is not installed: "
                              f"pip install -e '.[{e.extra}]'{e.hint}")
