"""Each step's prompts drawn by weight from several sources (`data.mix`), each with its own sampler.

`MixtureSampler` splits a step's n prompts among the sources by n seeded weighted draws (seed,
step), then asks each source's sampler (`draw(step, count)`: a dataset walk, or a curriculum over
that source's pool) for its share; dynamic-sampling refills split the same way with the round in the
seed. Observed groups go back to the sampler of their source (`metadata["mix"]`). State: each
source sampler's state by name, so a resumed run draws what an uninterrupted one would.
`source_metrics` gives per-source prompt counts, reward means and pass rates for the log.
Not guaranteed: the realised shares equal the weights on any one step (they do in expectation).
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any, Sequence

from rlvr.types import Group, Problem


class MixtureSampler:
    band = False   # the per-source curricula report nothing pool-wide

    def __init__(self, samplers: dict[str, Any], weights: dict[str, float], prompts_per_step: int,
                 seed: int):
        self.samplers, self.weights, self.n, self.seed = samplers, weights, prompts_per_step, seed
        self.names = list(samplers)

    def shares(self, step: int, count: int, salt: str) -> dict[str, int]:
        rng = random.Random(f"{self.seed}/{step}/mix/{salt}")
        drawn = Counter(rng.choices(self.names, [self.weights[k] for k in self.names], k=count))
        return {k: drawn[k] for k in self.names}

    def next_batch(self, step: int) -> list[Problem]:
        return [p for name, k in self.shares(step, self.n, "batch").items() if k
                for p in self.samplers[name].draw(step, k)]

    def refill(self, step: int, round_: int, n: int, exclude: set[str]) -> list[Problem]:
        out: list[Problem] = []
        for name, k in self.shares(step, n, f"refill/{round_}").items():
            sampler = self.samplers[name]
            if k and hasattr(sampler, "refill"):
                out += sampler.refill(step, round_, k, exclude)
            elif k:
                out += [p for p in sampler.draw(step, k) if p.id not in exclude]
        return out

    def observe(self, groups: Sequence[Group]) -> None:
        for name, sampler in self.samplers.items():
            mine = [g for g in groups if g.problem.metadata.get("mix") == name]
            if mine:
                sampler.observe(mine)

    def export(self, path) -> None:
        """Pass rates live in each source's curriculum; none is exported for a mixture."""
        return None

    def state_dict(self) -> dict[str, Any]:
        return {name: s.state_dict() for name, s in self.samplers.items()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for name, sampler in self.samplers.items():
            sampler.load_state_dict(state.get(name, {}))


def source_metrics(groups: Sequence[Group], names: Sequence[str]) -> dict[str, float]:
    """`source/NAME/prompts` for every source, and its `reward_mean` / `pass_rate` (share of
    completions marked correct) when it had prompts this step."""
    out: dict[str, float] = {}
    for name in names:
        mine = [g for g in groups if g.problem.metadata.get("mix") == name]
        out[f"source/{name}/prompts"] = float(len(mine))
        scores = [c.score for g in mine for c in g.completions if c.score is not None]
        if scores:
            out[f"source/{name}/reward_mean"] = sum(s.reward for s in scores) / len(scores)
            out[f"source/{name}/pass_rate"] = sum(bool(s.correct) for s in scores) / len(scores)
    return out
