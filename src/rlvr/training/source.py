"""The rollout source: where a step's scored groups come from.

`RolloutSource` owns the rollout engine, the verifiers, the problem sampler and dynamic sampling.
`generate` samples G completions per problem and `verify` scores them; `take(step)` returns the
groups a step trains on, generated at the step or ahead of it (`training/rollouts.py`, which is
handed this source). The step's generation metrics and timings go to the shared `Meter`.
Randomness comes from (seed, step, round), so a resumed run repeats an uninterrupted one.

State (`state_dict`, top-level checkpoint keys "sampler" and "rollouts"): the sampler's position
and pass rates, and the groups generated ahead of their step. The engine's weights are not state:
`sync` brings them up to date with the policy after each update and after a resume.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from rlvr.config import Config
from rlvr.evaluation.metrics import score_groups
from rlvr.models.device import seed_for
from rlvr.rollout.base import SamplingParams
from rlvr.sampling.mixture import MixtureSampler, source_metrics
from rlvr.training.rollouts import Rollouts
from rlvr.training.runlog import Meter
from rlvr.types import Group, Problem


class RolloutSource:
    def __init__(self, cfg: Config, engine, verifiers: dict[str, Any], sampler, meter: Meter,
                 copy_engine: Callable[[], Any] | None = None):
        """`copy_engine` builds the private engine that runs ahead (rollout.max_staleness > 0)."""
        r = cfg.rollout
        self.engine, self.verifiers, self.sampler, self.meter = engine, verifiers, sampler, meter
        self.sampling = SamplingParams(r.temperature, r.top_p, r.max_new_tokens, top_k=r.top_k,
                                       min_p=r.min_p, repetition_penalty=r.repetition_penalty,
                                       stop=tuple(r.stop), include_stop_str=r.include_stop_str,
                                       extra=tuple(sorted(r.generation_kwargs.items())))
        self.group_size, self.dynamic, self.seed = cfg.grpo.group_size, cfg.dynamic_sampling, cfg.seed
        self.pad_id = engine.pad_id
        self.rollouts = Rollouts(self, r.max_staleness, cfg.grpo.steps, copy_engine)

    @property
    def extras(self) -> dict[str, Any]:
        """The current step's metrics other than timings."""
        return self.meter.extras

    # ---- the verbs train() uses ------------------------------------------------------------------

    def take(self, step: int) -> list[Group]:
        return self.rollouts.take(step)

    def observe(self, groups: Sequence[Group]) -> None:
        self.sampler.observe(groups)
        if isinstance(self.sampler, MixtureSampler):   # per-source counts, rewards, pass rates
            self.meter.extras.update(source_metrics(groups, self.sampler.names))
        if getattr(self.sampler, "band", False):   # the curriculum: where the pool stands now
            counts = self.sampler.counts(self.sampler.step)
            self.meter.extras.update({f"curriculum/{k}": float(counts.get(k, 0))
                                      for k in ("active", "retired", "deferred", "due", "unseen")})

    def ahead(self, step: int, policy) -> None:
        self.rollouts.ahead(step, policy)

    def wait(self) -> None:
        self.rollouts.wait()

    def sync(self, policy, version: int) -> None:
        """Weight sync (only a version stamp when the engine shares the policy's modules)."""
        self.engine.load_weights(policy, version)
        self.meter.extras.update(self.engine.sync_metrics)   # e.g. the vLLM weight-sync canary

    # ---- generation ------------------------------------------------------------------------------

    def generate(self, problems: Sequence[Problem], step: int, engine=None,
                 extras: dict[str, Any] | None = None) -> list[Group]:
        """Generate and verify G completions per problem; with dynamic sampling, zero-variance
        groups are dropped and refilled from the sampler (round r samples with seed (step, r)).
        `engine` and `extras` (metrics and timings) default to the source's; rollouts generated
        ahead of their step pass their own."""
        from rlvr.monitor.doctor import behaviour_metrics
        from rlvr.sampling.curriculum import dynamic_sample

        g, ds = self.group_size, self.dynamic
        engine = engine or self.engine
        times = None if extras is None else extras
        extras = self.meter.extras if extras is None else extras

        def roll(batch: list[Problem], round_: int) -> list[Group]:
            with self.meter.timed("generate", times):
                stream = "rollout" if round_ == 0 else f"rollout/{round_}"
                groups = engine.generate(batch, g, self.sampling, seed_for(self.seed, step, stream))
            self.verify(groups, times)
            return groups

        if not ds.enabled:
            groups = roll(list(problems), 0)
            extras["dynamic/generated_completions"] = float(sum(len(x.completions) for x in groups))
        else:
            result = dynamic_sample(problems, len(problems), roll,
                                    lambda r, k, used: self.sampler.refill(step, r, k, used), g,
                                    ds.max_rounds, ds.std_tol, ds.oversample, ds.max_completions)
            self.sampler.observe(result.unused)     # dropped groups still inform the pass rates
            extras.update(result.metrics())
            groups = result.groups
        extras.update(behaviour_metrics(groups))
        return groups

    def verify(self, groups: Sequence[Group], times: dict[str, float] | None = None) -> None:
        with self.meter.timed("verify", times):
            score_groups(groups, self.verifiers)

    def close(self) -> None:
        for verifier in self.verifiers.values():  # stops verifier worker processes
            getattr(verifier, "close", lambda: None)()
        self.engine.close()   # Ray actors, a vLLM engine, sandboxes

    def state_dict(self) -> dict[str, Any]:
        return {"sampler": self.sampler.state_dict(), "rollouts": self.rollouts.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.sampler.load_state_dict(state["sampler"])
        self.rollouts.load_state_dict(state.get("rollouts", {}))
