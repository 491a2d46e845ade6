"""Sharded sampling and one update under torchrun (DDP or FSDP2), as the training loop wires them.

Usage: torchrun --nproc_per_node=2 shard_worker.py MODE OUT   (MODE: ddp | fsdp2). Every rank
samples its share of PROBLEMS through `ShardedEngine` (under FSDP2 over a `FullCopyEngine`), takes
one SGD update on the gathered groups with fixed advantages, syncs the engine (`load_weights`) and
samples again. Rank 0 writes both gathered sample lists (plain JSON-able lists) and the full
updated weights to OUT; `test_torchrun.py` recomputes all of it in one process.
"""

import random
import sys

import torch

N, SEED, SEED_AFTER = 4, 11, 12
LR, GRAD_CLIP = 1.0, 1.0


def problems():
    from rlvr.tasks.arithmetic import ArithmeticTask

    return ArithmeticTask(2).sample(random.Random(0), 5)     # unequal shares: 3 and 2


def params():
    from rlvr.rollout.base import SamplingParams

    return SamplingParams(max_new_tokens=12)


def signature(groups) -> list:
    return [[g.problem.id, g.prompt_ids, [[c.token_ids, c.logprobs, c.finish_reason] for c in g.completions]]
            for g in groups]


def one_update(train_model, groups, pad_id, dp=None) -> dict[str, float]:
    """One GRPO update with SGD (lr 1: the weight change is the clipped gradient) on `groups`,
    with fixed advantages (a random model earns no reward)."""
    from rlvr.algo.kl import KL_ESTIMATORS
    from rlvr.algo.losses import AGGREGATIONS, LossSpec
    from rlvr.models.batch import build_batch
    from rlvr.training.update import UpdateSpec, update_policy

    adv = torch.randn(len(groups), N, generator=torch.Generator().manual_seed(5))
    spec = UpdateSpec(LossSpec(kl_fn=KL_ESTIMATORS["k3"], agg_fn=AGGREGATIONS["token-mean"], eps_low=0.2,
                               eps_high=0.2, dual_clip=0.0, beta=0.0, entropy_coef=0.0),
                      temperature=1.0, grad_clip=GRAD_CLIP)
    optimizer = torch.optim.SGD(train_model.parameters(), lr=LR)
    return update_policy(train_model, optimizer, build_batch(groups, adv, pad_id), spec, dp=dp)


def main(mode: str, out: str) -> None:
    from rlvr.models.policy import load_policy
    from rlvr.rollout.hf import HFEngine
    from rlvr.training.distributed import DataParallel, FullCopyEngine, ShardedEngine

    torch.set_num_threads(1)
    model, tok = load_policy("builtin:tiny-llama", seed=0)
    dp = DataParallel(mode)
    train_model = dp.wrap(model)
    if mode == "fsdp2":
        copy, _ = load_policy("builtin:tiny-llama", seed=0)
        inner = FullCopyEngine(lambda m: HFEngine(m, tok), train_model, dp, copy)
    else:
        inner = HFEngine(model, tok)
    engine = ShardedEngine(inner, dp)
    before = engine.generate(problems(), N, params(), SEED)
    stats = one_update(train_model, before, engine.pad_id, dp)
    engine.load_weights(model, version=1)             # the loop passes the unwrapped policy
    after = engine.generate(problems(), N, params(), SEED_AFTER)
    state = dp.full_model_state(model)
    if dp.rank == 0:
        torch.save({"before": signature(before), "after": signature(after), "loss": stats["loss"],
                    "state": {k: v.detach().clone() for k, v in state.items()}}, out)
    dp.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
