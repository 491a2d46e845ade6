"""A training run as a composition of parts, built once from a Config: the plumbing behind `train()`.

`Run.open` validates the whole setup (model path, data, verifiers, references) before it writes
anything, then builds the parts and resumes from the newest complete checkpoint in the run
directory when there is one:

- `state`: the `TrainingState` (policy, train model, reference, optimizer, scheduler; the update),
- `source`: the `RolloutSource` (engine, verifiers, sampler, dynamic sampling; generate + verify),
- `log`: the `RunLog` (metrics, doctor, progress bar, transcripts),
- `checkpoints`: the `Checkpointer` (resume point, atomic saves, the best checkpoint),

plus the RNG streams. Save and resume are one loop over `parts` (see `training/resume.py`).
Randomness for each step (problem draws, sampling, minibatch order) is derived from (seed, step),
so a resumed run repeats exactly what an uninterrupted run does.

Under torchrun every rank opens the same Run (see `training/distributed.py`): data parallelism is
set up first and hands its local rank to the `Device`, so each rank computes on its own GPU; the
policy is wrapped for data parallelism, generation is sharded and gathered, and rank 0 alone
writes files; the other ranks log to a `NullLog`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rlvr import config as config_mod
from rlvr.config import Config
from rlvr.evaluation.metrics import greedy_accuracy
from rlvr.models.device import seed_for
from rlvr.monitor.atomic import write_dir_atomic, write_text_atomic
from rlvr.monitor.log import MetricsLog, NullLog, read_metrics
from rlvr.training import checkpoint
from rlvr.training.banner import banner, resume_note, say, unknown_text_warning
from rlvr.training.resume import check_resume_config, restore, trainer_state, write_config
from rlvr.training.runlog import RunLog
from rlvr.training.setup import (build_data_parallel, build_device, build_engine, build_problems,
                                 build_sampler, check_engine, set_threads)
from rlvr.training.source import RolloutSource
from rlvr.training.state import TrainingState, load_models, place_for_training, seed_all


def place(cfg: Config):
    """(DataParallel or None, Device): the process group first, then the rank's own device."""
    dp = build_data_parallel(cfg)
    return dp, build_device(cfg, dp)


def metrics_log(cfg: Config) -> MetricsLog:
    """Rank 0's metrics log, with TensorBoard and the other trackers `run.trackers` names (their
    runs continued from the run dir unless run.resume is never)."""
    import dataclasses

    from rlvr.monitor.trackers import open_trackers

    run_dir = Path(cfg.run.dir)
    trackers = open_trackers(cfg.run.trackers, run_dir, run_dir.resolve().name, dataclasses.asdict(cfg),
                             fresh=cfg.run.resume == "never")
    return MetricsLog(run_dir, tensorboard="tensorboard" in cfg.run.trackers, trackers=trackers)


class Run:
    def __init__(self, cfg: Config, state: TrainingState, source: RolloutSource, log: RunLog,
                 checkpoints: checkpoint.Checkpointer, tokenizer, heldout: list, dp=None):
        self.cfg, self.dir, self.dp = cfg, Path(cfg.run.dir), dp
        self.is_main = dp is None or dp.rank == 0
        self.state, self.source, self.log, self.checkpoints = state, source, log, checkpoints
        self.tokenizer, self.heldout = tokenizer, heldout
        self.parts = {"training": state, "rollout": source, "log": log, "checkpoints": checkpoints,
                      "rng": checkpoint.RngState()}
        self.start_step = 0

    @classmethod
    def open(cls, cfg: Config) -> "Run":
        set_threads(cfg.run.threads)
        check_engine(cfg)
        dp, device = place(cfg)
        is_main = dp is None or dp.rank == 0
        verifiers, train_problems, heldout, task = build_problems(cfg)
        checkpoints = checkpoint.Checkpointer(cfg.run.dir, cfg.run.keep_last, dp)
        resume_from = checkpoints.resume_point(cfg.run.resume)
        changed = check_resume_config(cfg, resume_from)    # refused changes stop here
        models = load_models(cfg, device, task)
        if is_main:
            write_config(cfg, resume_from, changed, checkpoint.step_of(resume_from))
            say(banner(cfg, device, models.policy, verifiers, train_problems, heldout))
            unknown = unknown_text_warning(models.tokenizer, [*train_problems[:500], *heldout[:500]])
            if unknown:
                say(unknown)
        seed_all(cfg.seed)
        train_model, fsdp_copy = place_for_training(models.policy, dp)
        engine = build_engine(cfg, models.engine_model, models.tokenizer, device, dp, fsdp_copy, task)
        state = TrainingState(cfg, models.policy, train_model, models.reference, device, dp,
                              engine.prompts.vocab_limit, models.teacher)
        source = RolloutSource(cfg, engine, verifiers, build_sampler(cfg, task, train_problems))
        out = metrics_log(cfg) if is_main else NullLog()
        log = RunLog(cfg, out, device, show_progress=is_main)
        run = cls(cfg, state, source, log, checkpoints, models.tokenizer, heldout, dp)
        if resume_from is not None:
            run.resume(resume_from, changed)
        else:  # a fresh start: lines left by a run killed before its first checkpoint go
            out.truncate_to({})
        return run

    def resume(self, ckpt: Path, changed: list | None = None) -> None:
        self.state.load_weights(ckpt)
        self.start_step = restore(self.parts, checkpoint.load_state(ckpt))
        self.source.sync(self.state.policy, self.start_step)   # its metrics belong to no step
        if self.is_main:
            say(resume_note(ckpt, self.start_step, self.cfg.grpo.steps, changed or []))

    def evaluate(self, step: int) -> dict[str, Any]:
        ev, engine, verifiers = self.cfg.eval, self.source.engine, self.source.verifiers
        max_new = ev.max_new_tokens or self.cfg.rollout.max_new_tokens
        with self.log.timed("eval"):
            result = greedy_accuracy(engine, self.heldout, verifiers, max_new)
            if ev.k:
                from rlvr.evaluation.ttc import ttc_metrics
                result.update(ttc_metrics(engine, self.heldout, verifiers, ev.k, max_new,
                                          seed_for(self.cfg.seed, 0, "eval"), self.cfg.rollout.temperature))
        self.log.write({"step": step, **result})
        return result

    def maybe_eval_and_save(self, step: int) -> None:
        done = step + 1
        last = done == self.cfg.grpo.steps
        every_eval, every_save = self.cfg.run.eval_every, self.cfg.run.save_every
        metric = None
        if self.heldout and (last or (every_eval and done % every_eval == 0)):
            metric = self.evaluate(done).get(self.cfg.run.best_metric)
        if last or (every_save and done % every_save == 0):
            self.save(done, metric)

    def save(self, done: int, metric: float | None) -> Path:
        state = trainer_state(self.parts, done)       # a collective under FSDP2: every rank
        model_state = self.state.model_state()
        return self.checkpoints.save(done, metric, state, self.state.policy, self.tokenizer,
                                     model_state, self.log.write, config_mod.dumps(self.cfg))

    def finish(self, wall_seconds: float) -> dict[str, Any]:
        model_state = self.state.model_state()
        self.source.close()
        if hasattr(self.state.teacher, "close"):   # a teacher server (distill.vllm)
            self.state.teacher.close()
        if not self.is_main:
            self.dp.barrier()
            self.dp.close()
            return {"steps": self.cfg.grpo.steps, "final_accuracy": None, "rank": self.dp.rank}
        def fill(final: Path) -> None:
            self.state.policy.save_pretrained(final, state_dict=model_state)
            self.tokenizer.save_pretrained(final)
        write_dir_atomic(self.dir / "final", fill)
        evals = [r for r in read_metrics(self.dir) if "eval/accuracy" in r]
        best = self.checkpoints.best[1]
        final_accuracy = evals[-1]["eval/accuracy"] if evals else None
        summary = {"steps": self.cfg.grpo.steps, "final_accuracy": final_accuracy,
                   "heldout_size": len(self.heldout), "wall_seconds": wall_seconds,
                   "best_checkpoint": str(best) if best else None}
        write_text_atomic(self.dir / "summary.json", json.dumps(summary, indent=2))
        self.source.sampler.export(self.dir / "pass_rates.jsonl")
        self.log.close()
        if self.dp is not None:
            self.dp.barrier()
            self.dp.close()
        return summary
