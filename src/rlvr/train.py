"""`train(cfg)`: the GRPO loop. Each line is one verb; the parts it drives live in `training/`."""

from __future__ import annotations

import re
import time
import warnings
from typing import Any

from rlvr.config import Config
from rlvr.training.run import Run
from rlvr.models.batch import build_batch


# The LR schedule follows training steps; a step whose groups all had zero advantage makes no
# optimizer step, which torch reports as "scheduler before optimizer" although nothing is skipped.
# `message` is a regular expression: escaped, or "()" would be an empty group and never match.
LR_WARNING = re.escape("Detected call of `lr_scheduler.step()` before")
warnings.filterwarnings("ignore", message=LR_WARNING)


def train(cfg: Config) -> dict[str, Any]:
    t0 = time.perf_counter()
    run = Run.open(cfg)                                       # resumes from the newest checkpoint
    state, source, log = run.state, run.source, run.log
    for step in log.steps(run.start_step):
        groups_P = source.take(step)                          # G scored completions each; weights >= step - k
        source.observe(groups_P)                              # pass rates steer the next batches
        advantages_P_G = state.advantages(groups_P)
        source.ahead(step, state.policy)                      # k > 0: step + k's rollouts generate meanwhile
        with log.timed("update"):
            batch = build_batch(groups_P, advantages_P_G, source.pad_id)
            stats = state.update(batch, step)                 # mu passes over minibatches, one LR step
        source.wait()
        source.sync(state.policy, step + 1)                   # weight sync; only a version stamp when shared
        log.step(step, groups_P, advantages_P_G, stats)       # metrics, alarms, transcripts
        run.maybe_eval_and_save(step)
    return run.finish(time.perf_counter() - t0)
