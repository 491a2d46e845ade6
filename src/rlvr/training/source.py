"""The rollout source: where a step's scored groups come from, and the metrics of producing them.

`RolloutSource` owns the rollout engine, the verifiers, the problem sampler, dynamic sampling and
the schedule of rollouts generated ahead (`Rollouts`). Its verbs return what they produce:
`take(step)` the groups a step trains on with their metrics (timings included), `observe` and
`sync` their own metrics; nothing is written into a shared place. Randomness comes from (seed,
step, round), so a resumed run repeats an uninterrupted one.

Rollouts ahead (`rollout.max_staleness = k`). With k = 0 (the default) `take(step)` draws the step's
problems and generates from the current weights, exactly as a synchronous loop does. With k > 0,
`ahead(step)` (called before the update of `step`) draws the problems of step + k, loads the
current weights (version `step`) into the engine's share (`RunsAhead.share()`, built on first use)
and generates and verifies them in a background thread while the update runs; `wait()` joins it.
Step s ≥ k then trains on rollouts from version s − k exactly; steps 0 … k − 1, which nothing ran
ahead for, are generated at the step from the current weights. The schedule is fixed, not
"whenever the thread is done", so a run is deterministic and a resumed run repeats it. Groups older
than the bound (version < step − k; only after resuming with a smaller k) are dropped, counted in
`async/dropped_groups`, and regenerated from the current weights. `async/staleness` is the mean
step − version of the groups a step trains on. `Rollouts` is the schedule alone: the buffer, the
bound and the thread; it never calls back into the source.

State (`state_dict`, top-level checkpoint keys "sampler" and "rollouts"): the sampler's position
(already advanced to step + k) and pass rates, and the groups generated ahead of their step (with
their version and metrics) and the drop count, saved after `wait()`, so a run killed at any instant
resumes exactly. The engine's weights are not state: `sync` brings them up to date with the policy
after each update and after a resume.
Not guaranteed: a speed-up from running ahead. On a CPU the thread competes with the update for the
same cores (it decodes on one thread); the gain is what the update leaves idle. An engine whose
weights live here (`HFEngine`) shares a private copy, doubling the policy's memory.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch

from rlvr.config import Config
from rlvr.evaluation.metrics import score_groups
from rlvr.models.device import seed_for
from rlvr.rollout.base import SamplingParams
from rlvr.sampling.mixture import MixtureSampler, source_metrics
from rlvr.training.runlog import timed
from rlvr.types import Group, Problem

Metrics = dict[str, Any]


@dataclass
class _Entry:
    version: int
    groups: list[Group]
    extras: Metrics = field(default_factory=dict)   # metrics of generating these groups


class Rollouts:
    """The schedule of rollouts generated ahead: which step's groups are buffered, whether they are
    fresh enough, and the one background thread that produces the next ones."""

    def __init__(self, max_staleness: int, total_steps: int | None = None):
        self.k, self.total_steps = max_staleness, total_steps      # total_steps None: no last step
        self.buffer: dict[int, _Entry] = {}
        self.dropped = 0
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def pop(self, step: int) -> tuple[list[Group], Metrics] | None:
        """The buffered groups of `step` and their metrics, or None (nothing buffered, or too stale:
        dropped and counted)."""
        entry = self.buffer.pop(step, None)
        if entry is not None and entry.version < step - self.k:
            self.dropped += len(entry.groups)
            return None
        return None if entry is None else (entry.groups, dict(entry.extras))

    def metrics(self, step: int, groups: Sequence[Group]) -> Metrics:
        """`async/*` of the groups `step` trains on (nothing when k = 0)."""
        if self.k == 0:
            return {}
        lag = sum(step - g.policy_version for g in groups)
        return {"async/staleness": lag / max(1, len(groups)), "async/dropped_groups": float(self.dropped)}

    def due(self, step: int) -> int | None:
        """The step whose rollouts should start generating now (step + k), or None."""
        target = step + self.k
        past_the_end = self.total_steps is not None and target >= self.total_steps
        return None if self.k == 0 or past_the_end or target in self.buffer else target

    def start(self, target: int, version: int, produce: Callable[[], tuple[list[Group], Metrics]]) -> None:
        """Run `produce` in a background thread; its groups become `target`'s, from `version`."""
        threads = torch.get_num_threads()

        def run() -> None:
            try:
                torch.set_num_threads(threads)   # a new thread may start with another default
                groups, metrics = produce()
                self.buffer[target] = _Entry(version, groups, metrics)
            except BaseException as exc:  # re-raised by wait() in the training thread
                self._error = exc

        self._thread = threading.Thread(target=run, name=f"rollouts-step-{target}", daemon=True)
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


class RolloutSource:
    def __init__(self, cfg: Config, engine, verifiers: dict[str, Any], sampler):
        """With rollout.max_staleness > 0, `engine.share()` (`RunsAhead`, checked when the engine is
        built) is the engine the rollouts ahead run on."""
        r = cfg.rollout
        self.engine, self.verifiers, self.sampler = engine, verifiers, sampler
        self.sampling = SamplingParams(r.temperature, r.top_p, r.max_new_tokens, top_k=r.top_k,
                                       min_p=r.min_p, repetition_penalty=r.repetition_penalty,
                                       stop=tuple(r.stop), include_stop_str=r.include_stop_str,
                                       extra=tuple(sorted(r.generation_kwargs.items())))
        self.group_size, self.dynamic, self.seed = cfg.grpo.group_size, cfg.dynamic_sampling, cfg.seed
        self.pad_id = engine.prompts.pad_id
        self.rollouts = Rollouts(r.max_staleness, cfg.grpo.steps)
        self.ahead_engine: Any = None      # the engine's share, built by the first ahead()

    # ---- the verbs train() uses ------------------------------------------------------------------

    def take(self, step: int) -> tuple[list[Group], Metrics]:
        """The groups step `step` trains on, and their metrics."""
        buffered = self.rollouts.pop(step)
        groups, metrics = buffered or self.generate(self.sampler.next_batch(step), step)
        metrics.update(self.rollouts.metrics(step, groups))
        return groups, metrics

    def observe(self, groups: Sequence[Group]) -> Metrics:
        """Feed the pass rates to the sampler; the curriculum's counts of where the pool stands."""
        self.sampler.observe(groups)
        metrics: Metrics = {}
        if isinstance(self.sampler, MixtureSampler):   # per-source counts, rewards, pass rates
            metrics.update(source_metrics(groups, self.sampler.names))
        if getattr(self.sampler, "band", False):   # the curriculum: where the pool stands now
            counts = self.sampler.counts(self.sampler.step)
            metrics.update({f"curriculum/{k}": float(counts.get(k, 0))
                            for k in ("active", "retired", "deferred", "due", "unseen")})
        return metrics

    def ahead(self, step: int, policy) -> None:
        """k > 0: start generating the rollouts of step + k from `policy`'s current weights."""
        target = self.rollouts.due(step)
        if target is None:
            return
        problems = self.sampler.next_batch(target)
        if self.ahead_engine is None:
            self.ahead_engine = self.engine.share()
        engine = self.ahead_engine
        engine.load_weights(policy, step)
        self.rollouts.start(target, step, lambda: self.generate(problems, target, engine))

    def wait(self) -> None:
        self.rollouts.wait()

    def sync(self, policy, version: int) -> Metrics:
        """Weight sync (only a version stamp when the engine shares the policy's modules); its
        metrics (e.g. the vLLM weight-sync canary)."""
        self.engine.load_weights(policy, version)
        return dict(self.engine.sync_metrics)

    # ---- generation ------------------------------------------------------------------------------

    def generate(self, problems: Sequence[Problem], step: int, engine=None) -> tuple[list[Group], Metrics]:
        """Generate and verify G completions per problem, with their metrics and timings; with
        dynamic sampling, zero-variance groups are dropped and refilled from the sampler (round r
        samples with seed (step, r)). `engine` defaults to the source's (rollouts ahead pass theirs)."""
        from rlvr.monitor.doctor import behaviour_metrics
        from rlvr.sampling.curriculum import dynamic_sample

        g, ds = self.group_size, self.dynamic
        engine = engine or self.engine
        metrics: Metrics = {}

        def roll(batch: list[Problem], round_: int) -> list[Group]:
            with timed(metrics, "generate"):
                stream = "rollout" if round_ == 0 else f"rollout/{round_}"
                groups = engine.generate(batch, g, self.sampling, seed_for(self.seed, step, stream))
            with timed(metrics, "verify"):
                score_groups(groups, self.verifiers)
            return groups

        if not ds.enabled:
            groups = roll(list(problems), 0)
            metrics["dynamic/generated_completions"] = float(sum(len(x.completions) for x in groups))
        else:
            result = dynamic_sample(problems, len(problems), roll,
                                    lambda r, k, used: self.sampler.refill(step, r, k, used), g,
                                    ds.max_rounds, ds.std_tol, ds.oversample, ds.max_completions)
            self.sampler.observe(result.unused)     # dropped groups still inform the pass rates
            metrics.update(result.metrics())
            groups = result.groups
        metrics.update(behaviour_metrics(groups))
        for verifier in self.verifiers.values():    # per-verifier gauges (the code sandbox's tier)
            metrics.update(getattr(verifier, "step_metrics", dict)())
        return groups, metrics

    def close(self) -> None:
        for verifier in self.verifiers.values():  # stops verifier worker processes
            getattr(verifier, "close", lambda: None)()
        self.engine.close()   # Ray actors, a vLLM engine, sandboxes

    def state_dict(self) -> dict[str, Any]:
        return {"sampler": self.sampler.state_dict(), "rollouts": self.rollouts.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.sampler.load_state_dict(state["sampler"])
        self.rollouts.load_state_dict(state.get("rollouts", {}))
