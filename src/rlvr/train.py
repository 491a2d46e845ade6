"""`train(cfg)`: the GRPO loop. Each line is one verb; the plumbing lives in `training/run.py`."""

from __future__ import annotations

import time
import warnings
from typing import Any

from rlvr.config import Config
from rlvr.training.run import Run
from rlvr.training.update import build_batch, update_policy


# The LR schedule follows training steps; a step whose groups all had zero advantage makes no
# optimizer step, which torch reports as "scheduler before optimizer" although nothing is skipped.
warnings.filterwarnings("ignore", message="Detected call of `lr_scheduler.step()` before")


def train(cfg: Config) -> dict[str, Any]:
    t0 = time.perf_counter()
    run = Run.open(cfg)                                       # resumes from the newest checkpoint
    g = cfg.grpo
    for step in run.steps():
        groups_P = run.rollouts.take(step)                    # G scored completions each; weights >= step - k
        run.sampler.observe(groups_P)                         # pass rates steer the next batches
        advantages_P_G = run.advantages(groups_P)
        run.rollouts.ahead(step)                              # k > 0: step + k's rollouts generate meanwhile
        with run.timed("update"):
            batch = build_batch(groups_P, advantages_P_G, run.pad_id)
            stats = update_policy(run.train_model, run.optimizer, batch, run.loss_spec, mu=g.mu,
                                  minibatch_size=g.minibatch_size, grad_clip=g.grad_clip,
                                  skip_zero_advantage=g.skip_zero_advantage, reference=run.reference,
                                  autocast=run.device.bf16, compute=run.compute,
                                  generator=run.device.host_generator(run.seed_for(step, "mb")),
                                  dp=run.dp)
            run.scheduler.step()
        run.rollouts.wait()
        run.engine.load_weights(run.policy, step + 1)         # weight sync; only a version stamp when shared
        run.log(step, groups_P, advantages_P_G, stats)        # metrics, alarms, transcripts
        run.maybe_eval_and_save(step)
    return run.finish(time.perf_counter() - t0)
