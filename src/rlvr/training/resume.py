"""Save and resume as one loop over a run's named stateful parts.

A part has `state_dict()` and `load_state_dict(state)`. `trainer_state` merges the parts' dicts
under the step; each part owns distinct top-level keys ("optimizer", "scheduler", "sampler",
"rollouts", "doctor", "metrics_offsets", "bad_steps", "reward_crashes", "best", "rng"), so older
checkpoints resume. `restore` hands every part the whole dict, in the order given; a part reads
only its own keys and supplies defaults for keys older checkpoints lack.
The weights are not in this dict: the checkpoint holds them as a Hugging Face model, and they are
loaded before the parts (see `TrainingState.load_weights`).
"""

from __future__ import annotations

from typing import Any, Mapping


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
