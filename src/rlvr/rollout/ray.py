"""`rollout.engine: ray`: N rollout engines as Ray actors in a placement group.

Imported only when a config chooses it (the `ray` extra). Each actor holds its own copy of the
policy and its own HF engine (`rollout.hf.HFEngine`); the actors are placed in one placement group
(one bundle per actor: 1 CPU, or 1 GPU where the cluster has them), on a local Ray started here or
on an existing cluster (`rollout.ray_address`). Ray places the engines; it does not orchestrate
training (docs/design/scaleout.md).

Guaranteed, and tested on a local cluster: problem i goes to actor i mod N, which samples its share
with a seed derived from (seed, actor index), and the groups come back in problem order, so a run
is reproducible for a given number of actors (not across numbers of actors). Weights go out after
each update as one state dict in the object store (`ray.put` once, every actor loads it).
Not done here: NCCL weight broadcast on GPUs; verifier actors. vLLM placed by Ray is the
`vllm_server` engine with `rollout.ray_address` (`rollout.vllm_ray`).
"""

from __future__ import annotations

import os
from typing import Any, Sequence

from rlvr.models.device import seed_for
from rlvr.rollout.base import PromptEncoder, SamplingParams, stamp
from rlvr.types import Group, Problem


class RolloutWorker:
    """What each actor runs: an HF engine over a model built from a config and a state dict."""

    def __init__(self, payload: dict, use_chat_template: bool, template_text: bool):
        import torch
        from transformers import AutoModelForCausalLM

        from rlvr.rollout.hf import HFEngine

        torch.set_num_threads(1)
        model = AutoModelForCausalLM.from_config(payload["config"])
        model.load_state_dict(payload["state"], strict=False)
        model.tie_weights()
        self.model = model.to(payload["dtype"])
        self.engine = HFEngine(self.model, payload["tokenizer"], use_chat_template=use_chat_template,
                               template_text=template_text)

    def generate(self, problems, n, params, seed):
        return self.engine.generate(problems, n, params, seed)

    def load(self, state) -> None:
        self.model.load_state_dict(state, strict=False)


class RayEngine:
    """A `RolloutEngine` over N actors, each with its own model copy and HF engine."""

    def __init__(self, policy, tokenizer, use_chat_template: bool = True, workers: int = 2,
                 address: str = "", template_text: bool = False):
        import ray
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        self.ray = ray
        # the actors' engines encode prompts with the same rule; this one is for the trainer's padding
        self.prompts = PromptEncoder.for_model(policy, tokenizer, use_chat_template, template_text)
        self.pad_id, self.vocab_limit = self.prompts.pad_id, self.prompts.vocab_limit
        self.model = None   # the weights live in the actors
        self.sync_metrics: dict[str, float] = {}
        self.version = 0
        self.started = not ray.is_initialized()
        if self.started:
            os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
            local: dict[str, Any] = {} if address else {"num_cpus": max(workers, os.cpu_count() or 1),
                                        "_node_ip_address": "127.0.0.1",
                                        "object_store_memory": 256 * 2**20}
            ray.init(address=address or None, include_dashboard=False, log_to_driver=False,
                     runtime_env={"env_vars": {"OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}},
                     **local)
        gpu = ray.cluster_resources().get("GPU", 0) >= workers
        self.group = placement_group([{"GPU": 1} if gpu else {"CPU": 1}] * workers, strategy="PACK")
        ray.get(self.group.ready())
        payload = ray.put({"config": policy.config, "state": _cpu_state(policy), "tokenizer": tokenizer,
                           "dtype": next(policy.parameters()).dtype})
        actor: Any = ray.remote(num_gpus=1 if gpu else 0, num_cpus=0 if gpu else 1)(RolloutWorker)
        self.actors = [actor.options(scheduling_strategy=PlacementGroupSchedulingStrategy(
            self.group, placement_group_bundle_index=i)).remote(payload, use_chat_template, template_text)
            for i in range(workers)]

    def generate(self, problems: Sequence[Problem], n: int, params: SamplingParams,
                 seed: int) -> list[Group]:
        k = len(self.actors)
        shares = [list(problems)[i::k] for i in range(k)]
        futures = [a.generate.remote(s, n, params, seed_for(seed, f"actor{i}"))
                   for i, (a, s) in enumerate(zip(self.actors, shares)) if s]
        out: list = [None] * len(problems)
        for i, groups in enumerate(self.ray.get(futures)):
            out[i::k] = groups
        stamp(out, self.version, seed)
        return out

    def load_weights(self, policy, version: int = 0) -> None:
        self.version = version
        ref = self.ray.put(_cpu_state(policy))
        self.ray.get([a.load.remote(ref) for a in self.actors])

    def close(self) -> None:
        from ray.util.placement_group import remove_placement_group

        for a in self.actors:
            self.ray.kill(a)
        remove_placement_group(self.group)
        if self.started:
            self.ray.shutdown()


def _cpu_state(policy) -> dict:
    return {k: v.detach().to("cpu") for k, v in policy.state_dict().items()}
