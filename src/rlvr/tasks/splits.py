"""Train and held-out draws shared by the procedural tasks: a task supplies `draw(rng)` (one
random problem, whose `metadata["split"]` a hash decides) and these keep the draws of one split."""

from __future__ import annotations

import random
from typing import Callable

from rlvr.types import Problem

Draw = Callable[[random.Random], Problem]


def sample_split(draw: Draw, rng: random.Random, n: int, split: str = "train") -> list[Problem]:
    """n problems from `split` ("train" or "heldout"), drawn with `rng` (repeats allowed)."""
    out: list[Problem] = []
    while len(out) < n:
        p = draw(rng)
        if p.metadata["split"] == split:
            out.append(p)
    return out


def heldout_set(draw: Draw, n: int, seed: int = 1234) -> list[Problem]:
    """A fixed held-out set of n distinct problems (the same for every run with this seed)."""
    rng = random.Random(seed)
    seen: set[str] = set()
    out: list[Problem] = []
    while len(out) < n:
        p = draw(rng)
        if p.metadata["split"] == "heldout" and p.id not in seen:
            seen.add(p.id)
            out.append(p)
    return out
