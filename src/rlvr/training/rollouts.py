"""Where each step's groups come from: generated at the step, or ahead of it while the trainer updates.

`rollout.max_staleness = k`. With k = 0 (the default) `take(step)` draws the step's problems and
generates from the current weights, exactly as a synchronous loop does. With k > 0, `ahead(step)`
(called before the update of `step`) draws the problems of step + k, copies the current weights
(version `step`) into a private copy of the policy and generates and verifies them in a
background thread while the update runs; `wait()` joins it. Step s ≥ k then trains on rollouts
from version s − k exactly; steps 0 … k − 1, which nothing ran ahead for, are generated at the step
from the current weights. The schedule is fixed, not "whenever the thread is done", so a run
is deterministic and a resumed run repeats it.

Groups older than the bound (version < step − k; only after resuming with a smaller k) are dropped,
counted in `async/dropped_groups`, and regenerated from the current weights. `async/staleness` is
the mean step − version of the groups a step trains on.

State: the buffered groups (with their version and per-step metrics) and the drop count are in
`state_dict()`, saved in every checkpoint after `wait()`; together with the sampler state (the data
position, already advanced to step + k) a run killed at any instant resumes exactly.
Receives the rollout source (`training/source.py`): its sampler, `generate` and the step's
`extras`; nothing else of the run.
Not guaranteed: a speed-up. On a CPU the thread competes with the update for the same cores (it
decodes on one thread); the gain is what the update leaves idle. The private copy doubles the
policy's memory. Only engines that accept a model (`HFEngine`) run ahead here.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from rlvr.types import Group


@dataclass
class _Entry:
    version: int
    groups: list[Group]
    extras: dict[str, Any] = field(default_factory=dict)   # metrics of generating these groups


class Rollouts:
    def __init__(self, source, max_staleness: int, total_steps: int | None = None,
                 copy_engine: Callable[[], Any] | None = None):
        """`copy_engine()` builds the private engine that runs ahead (on the first `ahead`);
        `total_steps` None: no last step."""
        self.source, self.k = source, max_staleness
        self.total_steps, self.copy_engine = total_steps, copy_engine
        self.buffer: dict[int, _Entry] = {}
        self.dropped = 0
        self.engine: Any = None            # the private copy, built by the first ahead()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def take(self, step: int) -> list[Group]:
        """The groups step `step` trains on (their metrics go to the source's `extras`)."""
        source = self.source
        entry = self.buffer.pop(step, None)
        if entry is not None and entry.version < step - self.k:
            self.dropped += len(entry.groups)
            entry = None
        if entry is None:
            groups = source.generate(source.sampler.next_batch(step), step)
        else:
            groups = entry.groups
            source.extras.update(entry.extras)
        if self.k > 0:
            lag = sum(step - g.policy_version for g in groups)
            source.extras["async/staleness"] = lag / max(1, len(groups))
            source.extras["async/dropped_groups"] = float(self.dropped)
        return groups

    def ahead(self, step: int, policy) -> None:
        """k > 0: start generating the rollouts of step + k from `policy`'s current weights."""
        target, source = step + self.k, self.source
        past_the_end = self.total_steps is not None and target >= self.total_steps
        if self.k == 0 or past_the_end or target in self.buffer:
            return
        problems = source.sampler.next_batch(target)
        if self.engine is None:
            if self.copy_engine is None:
                raise ValueError("rollout.max_staleness > 0 needs an engine to copy (copy_engine)")
            self.engine = self.copy_engine()
        self.engine.load_weights(policy, step)
        threads = torch.get_num_threads()

        def produce() -> None:
            try:
                torch.set_num_threads(threads)   # a new thread may start with another default
                extras: dict[str, Any] = {}
                groups = source.generate(problems, target, engine=self.engine, extras=extras)
                self.buffer[target] = _Entry(step, groups, extras)
            except BaseException as exc:  # re-raised by wait() in the training thread
                self._error = exc

        self._thread = threading.Thread(target=produce, name=f"rollouts-step-{target}", daemon=True)
        self._thread.start()

    def wait(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def state_dict(self) -> dict[str, Any]:
        return {"buffer": {s: (e.version, e.groups, e.extras) for s, e in self.buffer.items()},
                "dropped": self.dropped}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.buffer = {int(s): _Entry(v, g, x) for s, (v, g, x) in state.get("buffer", {}).items()}
        self.dropped = int(state.get("dropped", 0))
