"""Which config changes a resumed run may take: pure functions of two config mappings.

A checkpoint keeps the config its weights were trained with (`config.yaml` in the checkpoint).
Resuming with another config would apply part of it (group size, reward terms) from the resumed
step on while the optimizer and LR schedule continue the old run, so `run_altering` lists every
changed key except those that only say how the run is watched, saved or evaluated (`SAFE_KEYS`,
`SAFE_SECTIONS`), and `grpo.steps` when both configs use a constant LR schedule (there the number
of steps changes no step's learning rate). The caller refuses the listed changes unless
`run.resume_allow_changes` is true. Guaranteed: no file system access, no torch.
"""

from __future__ import annotations

from typing import Any, Mapping

# keys that change what is logged, saved or evaluated, never the weights a step produces
SAFE_KEYS = frozenset({
    "run.dir", "run.save_every", "run.keep_last", "run.best_metric", "run.eval_every", "run.resume",
    "run.resume_allow_changes", "run.threads", "run.progress", "run.log_every", "run.report",
    "run.transcripts_every", "run.max_bad_steps", "run.strict_rewards",
    "data.eval_path", "data.heldout_size"})
SAFE_SECTIONS = ("doctor.", "eval.")


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"a.b": value} for every leaf of a nested mapping (config sections are mappings)."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, Mapping) and not key.endswith("_options"):   # *_options: one value
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """(key, old value, new value) for every key whose value differs, in key order; a key one side
    lacks (a config written before the key existed) counts as unchanged."""
    a, b = flatten(old), flatten(new)
    return [(k, a[k], b[k]) for k in sorted(a.keys() & b.keys()) if _plain(a[k]) != _plain(b[k])]


def run_altering(diff: list[tuple[str, Any, Any]], old: Mapping[str, Any],
                 new: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """The changes in `diff` that alter the trained weights (see the module docstring)."""
    constant = all(flatten(c).get("grpo.lr_schedule") == "constant" for c in (old, new))
    return [(k, a, b) for k, a, b in diff
            if k not in SAFE_KEYS and not k.startswith(SAFE_SECTIONS)
            and not (k == "grpo.steps" and constant)]


def describe(diff: list[tuple[str, Any, Any]]) -> str:
    return "; ".join(f"{k}: {a!r} -> {b!r}" for k, a, b in diff)


def _plain(v: Any) -> Any:
    """Tuples and lists compare alike (YAML writes tuples as lists)."""
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, Mapping):
        return {k: _plain(x) for k, x in v.items()}
    return v
