"""Learning-rate schedules as multipliers of the base LR: linear warmup, then cosine / linear / constant."""

from __future__ import annotations

import math
from typing import Callable


def lr_multiplier(kind: str, total_steps: int, warmup_steps: int = 0,
                  min_ratio: float = 0.0) -> Callable[[int], float]:
    """f(step) → multiplier; warmup rises linearly from 1/(warmup+1) to 1."""
    decay_steps = max(1, total_steps - warmup_steps)

    def decay(progress: float) -> float:
        if kind == "cosine":
            return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))
        if kind == "linear":
            return 1 - (1 - min_ratio) * progress
        return 1.0

    def f(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / (warmup_steps + 1)
        return decay(min(1.0, (step - warmup_steps) / decay_steps))

    return f
