"""Which problems each step trains on: the sampler seam (`next_batch` / `observe` / state).

`TaskSampler` draws fresh procedural problems; `DatasetSampler` walks seeded permutations of a
fixed problem list, epoch by epoch. Both derive their randomness from (seed, step) or (seed,
epoch), and their state is a few integers, so a resumed run draws exactly the problems an
uninterrupted one would. The curriculum sampler (pass-rate band) implements the same methods;
`draw(step, count)` is the mixture sampler's way in (`rlvr.sampling.mixture`).
"""

from __future__ import annotations

import random
from typing import Any, Sequence

from rlvr.types import Group, Problem


class TaskSampler:
    def __init__(self, task, prompts_per_step: int, seed: int | str):
        self.task, self.n, self.seed = task, prompts_per_step, seed

    def next_batch(self, step: int) -> list[Problem]:
        return self.draw(step, self.n)

    def draw(self, step: int, count: int) -> list[Problem]:
        return self.task.sample(random.Random(f"{self.seed}/{step}"), count, "train")

    def observe(self, groups: Sequence[Group]) -> None:
        return None

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        return None

    def export(self, path) -> None:
        """No pass rates are tracked without the curriculum: nothing to export."""
        return None


class DatasetSampler:
    def __init__(self, problems: Sequence[Problem], prompts_per_step: int, seed: int | str):
        # a Sequence is kept as it is: a `ProblemTable` builds each problem only when drawn
        self.problems, self.n, self.seed = problems, prompts_per_step, seed
        self.cursor = 0  # problems consumed since the start of training
        self._epoch_order: tuple[int, list[int]] = (-1, [])  # derived from (seed, epoch); not state

    def _order(self, epoch: int) -> list[int]:
        if self._epoch_order[0] != epoch:
            order = list(range(len(self.problems)))
            random.Random(f"{self.seed}/epoch/{epoch}").shuffle(order)
            self._epoch_order = (epoch, order)
        return self._epoch_order[1]

    def next_batch(self, step: int) -> list[Problem]:
        return self.draw(step, self.n)

    def draw(self, step: int, count: int) -> list[Problem]:
        """The next `count` problems of the epoch walk (`step` is not used: the cursor is the state)."""
        out: list[Problem] = []
        size = len(self.problems)
        while len(out) < count:
            epoch, pos = divmod(self.cursor, size)
            out.append(self.problems[self._order(epoch)[pos]])
            self.cursor += 1
        return out

    def observe(self, groups: Sequence[Group]) -> None:
        return None

    def state_dict(self) -> dict[str, Any]:
        return {"cursor": self.cursor}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.cursor = int(state.get("cursor", 0))

    def export(self, path) -> None:
        """No pass rates are tracked without the curriculum: nothing to export."""
        return None
