"""Save and resume as one loop over a run's named stateful parts.

A part has `state_dict()` and `load_state_dict(state)`. `trainer_state` merges the parts' dicts
under the step; each part owns distinct top-level keys ("optimizer", "scheduler", "sampler",
"rollouts", "doctor", "metrics_offsets", "bad_steps", "reward_crashes", "best", "rng"), so older
checkpoints resume. `restore` hands every part the whole dict, in the order given; a part reads
only its own keys and supplies defaults for keys older checkpoints lack.
The weights are not in this dict: the checkpoint holds them as a Hugging Face model, and they are
loaded before the parts (see `TrainingState.load_weights`).

Before anything loads, `check_resume_config` compares the new config with the one the checkpoint
was trained with (`rlvr.config.resume` says which changes alter the run; those are refused unless
`run.resume_allow_changes`), and `write_config` keeps the run directory's `config.yaml` as the
first run wrote it: a resume that changes keys writes its own config beside it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from rlvr import config as config_mod
from rlvr.config import Config
from rlvr.config.resume import changes, describe, run_altering
from rlvr.errors import ConfigError
from rlvr.training.checkpoint import CONFIG


def trainer_state(parts: Mapping[str, Any], done: int) -> dict[str, Any]:
    state: dict[str, Any] = {"step": done}
    for name, part in parts.items():
        own = part.state_dict()
        shared = sorted(own.keys() & state.keys())
        if shared:
            raise ValueError(f"checkpoint part {name!r} writes keys another part owns: {shared}")
        state.update(own)
    return state


def restore(parts: Mapping[str, Any], state: dict[str, Any]) -> int:
    """Load every part from `state`; returns the number of steps done."""
    for part in parts.values():
        part.load_state_dict(state)
    return state["step"]


# ---- the config a resumed run continues with -----------------------------------------------------

def saved_config(ckpt: Path, run_dir: Path) -> dict[str, Any] | None:
    """The config `ckpt`'s weights were trained with: its own `config.yaml`, or for a checkpoint
    written before checkpoints kept one, the run directory's; None when neither exists."""
    import yaml

    for path in (ckpt / CONFIG, run_dir / CONFIG):
        if path.is_file():
            data = yaml.safe_load(path.read_text())
            return data if isinstance(data, dict) else None
    return None


def check_resume_config(cfg: Config, ckpt: Path | None) -> list[tuple[str, Any, Any]]:
    """The config changes a resume from `ckpt` takes ([] for a fresh start); raises ConfigError
    listing the changes that alter the run unless `run.resume_allow_changes` is true."""
    if ckpt is None:
        return []
    old = saved_config(ckpt, Path(cfg.run.dir))
    if old is None:
        return []
    new = config_mod.to_dict(cfg)
    diff = changes(old, new)
    altering = run_altering(diff, old, new)
    if altering and not cfg.run.resume_allow_changes:
        raise ConfigError(f"run.resume: the config differs from the one checkpoint {ckpt} was trained "
                          f"with, in keys that alter the run: {describe(altering)}. Use a new run.dir "
                          "for a new run, restore those values, or set run.resume_allow_changes=true "
                          "to continue with them")
    return diff


def write_config(cfg: Config, ckpt: Path | None, diff: list[tuple[str, Any, Any]], step: int) -> Path | None:
    """A fresh run writes `config.yaml`; a resume never rewrites it (the earlier steps were trained
    with it): a resume with changes writes its config beside it, `config.resume-step-NNNNNN.yaml`."""
    run_dir = Path(cfg.run.dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    first = run_dir / CONFIG
    if ckpt is None or not first.is_file():
        config_mod.dump(cfg, first)
        return first
    if not diff:
        return None
    path = run_dir / f"config.resume-step-{step:06d}.yaml"
    config_mod.dump(cfg, path)
    return path
