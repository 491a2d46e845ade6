"""`rollout.engine: ray` on a local Ray cluster, checked by what must be equal, not by learning.

- Each of the 2 rollout actors returns, for its share (problems i, i + 2, ...), exactly the groups
  a one-process `HFEngine` returns on that share with that actor's seed (`seed_for(seed, f"actor{i}")`):
  the same tokens, the same behaviour log-probs (bitwise: the same CPU arithmetic in both
  processes, one thread each), in problem order, stamped with the call's seed and weight version.
- After one update in the driver and `load_weights`, the actors sample from the updated weights:
  again exactly the one-process groups on the updated model (and not the groups of the old one).
- A short `rlvr train` with `engine: ray` finishes and writes its metrics, eval and final model.
"""

from __future__ import annotations

import json
import random
import sys

import pytest

pytest.importorskip("ray", reason="ray is not installed (make venv-ray)")

WORKERS, N = 2, 4


def _signature(groups) -> list:
    return [(g.problem.id, g.prompt_ids, g.policy_version, g.seed,
             [(c.token_ids, c.logprobs, c.finish_reason, c.text) for c in g.completions]) for g in groups]


def _expected(model, tok, problems, params, seed, version):
    """What the Ray engine must return: a one-process HFEngine on each actor's share, with the
    actor's seed, put back in problem order and stamped with the call's seed."""
    from rlvr.rollout.hf import HFEngine
    from rlvr.models.device import seed_for

    local = HFEngine(model, tok)
    out = [None] * len(problems)
    for i in range(WORKERS):
        out[i::WORKERS] = local.generate(problems[i::WORKERS], N, params, seed_for(seed, f"actor{i}"))
    for g in out:
        g.policy_version, g.seed = version, seed
    return out


def _one_update(model, groups, pad_id) -> None:
    """One plain GRPO update in the driver (the Ray engine only samples), with fixed advantages
    (a random model earns no reward), large enough that the next samples change."""
    import torch

    from rlvr.algo.kl import KL_ESTIMATORS
    from rlvr.algo.losses import AGGREGATIONS, LossSpec
    from rlvr.models.batch import build_batch
    from rlvr.training.update import UpdateSpec, update_policy

    adv = torch.randn(len(groups), N, generator=torch.Generator().manual_seed(5))
    spec = UpdateSpec(LossSpec(kl_fn=KL_ESTIMATORS["k3"], agg_fn=AGGREGATIONS["token-mean"], eps_low=0.2,
                               eps_high=0.2, dual_clip=0.0, beta=0.0, entropy_coef=0.0),
                      temperature=1.0, grad_clip=0.0)
    update_policy(model, torch.optim.SGD(model.parameters(), lr=3.0), build_batch(groups, adv, pad_id),
                  spec)


def test_each_ray_actor_samples_its_share_like_one_process():
    from rlvr.models.policy import load_policy
    from rlvr.rollout.base import SamplingParams
    from rlvr.rollout.ray import RayEngine
    from rlvr.tasks.arithmetic import ArithmeticTask

    model, tok = load_policy("builtin:tiny-llama", seed=0)
    problems = ArithmeticTask(2).sample(random.Random(0), 5)        # unequal shares: 3 and 2
    params = SamplingParams(max_new_tokens=12)
    engine = RayEngine(model, tok, workers=WORKERS)
    try:
        got = engine.generate(problems, N, params, seed=11)
        want = _expected(model, tok, problems, params, 11, 0)
        assert [g.problem.id for g in got] == [p.id for p in problems]
        assert _signature(got) == _signature(want)

        _one_update(model, got, engine.pad_id)
        engine.load_weights(model, version=1)
        after = engine.generate(problems, N, params, seed=11)
        assert _signature(after) == _signature(_expected(model, tok, problems, params, 11, 1))
        assert [c.token_ids for g in after for c in g.completions] != \
            [c.token_ids for g in got for c in g.completions], "the update changed no sample"
    finally:
        engine.close()


def test_short_ray_training_run_finishes(tmp_path):
    from quickrun import run_cli

    run_dir = tmp_path / "ray"
    cfg = tmp_path / "ray.yaml"
    cfg.write_text(
        f"seed: 0\nrun: {{dir: {run_dir}, eval_every: 2, save_every: 2, progress: false, threads: 1, "
        "report: false}\nmodel: {path: 'builtin:tiny-llama'}\n"
        "data: {task: arithmetic, difficulty: 2, heldout_size: 8}\n"
        f"rollout: {{max_new_tokens: 10, engine: ray, workers: {WORKERS}}}\n"
        "grpo: {steps: 2, group_size: 4, prompts_per_step: 4, lr: 1.0e-3}\n")
    run_cli([sys.executable, "-m", "rlvr.cli", "train", str(cfg)], timeout=600)
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if "reward/mean" in r] == [0, 1], records
    assert [r["step"] for r in records if "eval/accuracy" in r] == [2], records
    assert (run_dir / "final" / "model.safetensors").exists()
