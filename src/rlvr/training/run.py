"""Everything a training run holds, built once from a Config: the plumbing behind `train()`.

`Run.open` validates the whole setup (model path, data, verifiers, references) before it writes
anything, then builds the policy, optimizer, engine, verifiers, sampler and logs, and resumes from
the newest complete checkpoint in the run directory when there is one. Randomness for each step
(problem draws, sampling, minibatch order) is derived from (seed, step), so a resumed run repeats
exactly what an uninterrupted run does.

Under torchrun every rank opens the same Run (see `training/distributed.py`): the policy is wrapped
for data parallelism (`train_model`), generation is sharded and gathered, and rank 0 alone writes
files; the other ranks log to a `NullLog`.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import random
import time
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np
import torch

from rlvr.training import checkpoint
from rlvr import config as config_mod
from rlvr.algo.advantages import ADVANTAGES
from rlvr.algo.kl import KL_ESTIMATORS
from rlvr.algo.losses import AGGREGATIONS
from rlvr.algo.offpolicy import CAPPED_METRIC
from rlvr.config import Config
from rlvr.errors import UserError
from rlvr.evaluation.metrics import greedy_accuracy, score_groups
from rlvr.monitor.log import MetricsLog, read_metrics
from rlvr.rollout.base import SamplingParams
from rlvr.training.distributed import NullLog
from rlvr.training.setup import (behaviour_correction, build_data_parallel, build_device, build_engine,
                                 build_problems,
                                 build_sampler, check_engine, set_threads)
from rlvr.training.schedule import lr_multiplier
from rlvr.monitor.stats import step_metrics
from rlvr.types import Group, Problem
from rlvr.training.update import LossSpec


class Run:
    def __init__(self, cfg: Config):
        self.cfg = cfg
        self.dir = Path(cfg.run.dir)
        self.ckpt_root = self.dir / "checkpoints"
        self.timings: dict[str, float] = {}     # timing/* of the current step
        self.extras: dict[str, Any] = {}        # other per-step metrics from the stages
        self.best: tuple[float, Path | None] = (float("-inf"), None)
        self.bad_steps = 0
        self.start_step = 0

    @classmethod
    def open(cls, cfg: Config) -> "Run":
        run = cls(cfg)
        set_threads(cfg.run.threads)
        check_engine(cfg)
        run.device = build_device(cfg)
        run.dp = build_data_parallel(cfg)
        run.is_main = run.dp is None or run.dp.rank == 0
        run.verifiers, run.train_problems, run.heldout, run.task = build_problems(cfg)
        resume_from = run._resume_point()
        from rlvr.models.policy import load_policy, load_reference
        run.policy, run.tokenizer = load_policy(cfg.model.path, cfg.model.dtype, cfg.seed, run.device)
        if run.task is not None:
            run.task.check_tokenizer(run.tokenizer)   # before any file is written
        if cfg.model.gradient_checkpointing and hasattr(run.policy, "gradient_checkpointing_enable"):
            run.policy.gradient_checkpointing_enable()   # HF forward; the fused path checkpoints itself
        run.engine_model = run.policy
        if cfg.model.lora.r > 0:   # the engine samples from a plain copy that receives merged weights
            from rlvr.models.lora import AdaptersDisabled, apply_lora
            run.engine_model = copy.deepcopy(run.policy)
            run.policy = apply_lora(run.policy, cfg.model.lora, cfg.model.path, cfg.seed)
            run.reference = AdaptersDisabled(run.policy) if cfg.grpo.beta > 0 else None
        else:
            run.reference = load_reference(run.policy) if cfg.grpo.beta > 0 else None
        if run.is_main:
            run.dir.mkdir(parents=True, exist_ok=True)
            config_mod.dump(cfg, run.dir / "config.yaml")
        run._build_training_state()
        run.log_out = MetricsLog(run.dir) if run.is_main else NullLog()
        if resume_from is not None:
            run._resume(resume_from)
        else:  # a fresh start: lines left by a run killed before its first checkpoint go
            run.log_out.truncate_to({})
        return run

    def _resume_point(self) -> Path | None:
        mode = self.cfg.run.resume
        if mode == "never":
            if checkpoint.latest(self.ckpt_root) is not None:
                raise UserError(f"run.dir {self.dir} already holds checkpoints; use a new run.dir, "
                                "or run.resume=auto to continue that run")
            return None
        if mode == "auto":
            if self.is_main:
                checkpoint.clean_partial(self.ckpt_root)
            if self.dp is not None:
                self.dp.barrier()
            return checkpoint.latest(self.ckpt_root)
        path = Path(mode)
        if not (path / checkpoint.MARKER).is_file():
            raise UserError(f"run.resume: {path} is not a complete checkpoint directory")
        return path

    def _build_training_state(self) -> None:
        cfg, g = self.cfg, self.cfg.grpo
        torch.manual_seed(cfg.seed)
        random.seed(cfg.seed)
        np.random.seed(cfg.seed % 2**32)
        engine_model = copy.deepcopy(self.policy) if self.dp and self.dp.mode == "fsdp2" else None
        self.train_model = self.dp.wrap(self.policy) if self.dp else self.policy
        trainable = [p for p in self.train_model.parameters() if p.requires_grad]   # LoRA: the adapters
        self.optimizer = torch.optim.AdamW(trainable, lr=g.lr, betas=g.adam_betas,
                                           weight_decay=g.weight_decay)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lr_multiplier(g.lr_schedule, g.steps, g.warmup_steps, g.min_lr_ratio))
        self.engine = build_engine(cfg, self.engine_model, self.tokenizer, self.device, self.dp,
                                   engine_model, self.task)
        from rlvr.training.rollouts import Rollouts
        self.rollouts = Rollouts(self, cfg.rollout.max_staleness)
        self.sampler = build_sampler(cfg, self.task, self.train_problems)
        from rlvr.monitor.doctor import Doctor
        self.doctor = Doctor(cfg)
        self.advantage_fn = ADVANTAGES[g.advantage]
        self.loss_spec = LossSpec(
            kl_fn=KL_ESTIMATORS[g.kl_estimator], agg_fn=AGGREGATIONS[g.loss_agg],
            agg_counts_tokens=g.loss_agg == "token-mean", eps_low=g.eps_low, eps_high=g.eps_high,
            dual_clip=g.dual_clip, beta=g.beta, entropy_coef=g.entropy_coef,
            temperature=cfg.rollout.temperature, is_weights=behaviour_correction(g),
            capped_metric=CAPPED_METRIC[g.is_mode])
        r = cfg.rollout
        self.sampling = SamplingParams(r.temperature, r.top_p, r.max_new_tokens, top_k=r.top_k)
        self.pad_id = self.engine.pad_id
        from rlvr.training.update import Compute
        self.compute = Compute(self.device, cfg.model.gradient_checkpointing, g.micro_batch_tokens,
                               self.engine.vocab_limit)

    # ---- the verbs used by train() -------------------------------------------------------------

    def steps(self) -> Iterator[int]:
        from rlvr.monitor.progress import Progress
        with Progress(self.cfg.grpo.steps, self.start_step,
                      enabled=self.cfg.run.progress and self.is_main) as bar:
            self.bar = bar
            for step in range(self.start_step, self.cfg.grpo.steps):
                self.step_started = time.perf_counter()
                self.timings, self.extras = {}, {}
                self.device.reset_peak_memory()
                yield step

    def seed_for(self, step: int, stream: str = "rollout") -> int:
        digest = hashlib.sha256(f"{self.cfg.seed}/{step}/{stream}".encode()).digest()
        return int.from_bytes(digest[:8], "little") >> 1

    @contextlib.contextmanager
    def timed(self, name: str, into: dict[str, float] | None = None):
        into = self.timings if into is None else into
        t0 = time.perf_counter()
        yield
        into[f"timing/{name}"] = into.get(f"timing/{name}", 0.0) + time.perf_counter() - t0

    def generate(self, problems: Sequence[Problem], step: int, engine=None,
                 extras: dict[str, Any] | None = None) -> list[Group]:
        """Generate and verify G completions per problem; with dynamic sampling, zero-variance
        groups are dropped and refilled from the sampler (round r samples with seed (step, r)).
        `engine` and `extras` (metrics and timings) default to the run's; rollouts generated ahead
        of their step pass their own."""
        from rlvr.sampling.curriculum import dynamic_sample
        from rlvr.monitor.doctor import behaviour_metrics

        g, ds = self.cfg.grpo.group_size, self.cfg.dynamic_sampling
        engine = engine or self.engine
        times = None if extras is None else extras
        extras = self.extras if extras is None else extras

        def roll(batch: list[Problem], round_: int) -> list[Group]:
            with self.timed("generate", times):
                groups = engine.generate(batch, g, self.sampling,
                                         self.seed_for(step, "rollout" if round_ == 0 else f"rollout/{round_}"))
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
        with self.timed("verify", times):
            score_groups(groups, self.verifiers)

    def advantages(self, groups: Sequence[Group]) -> torch.Tensor:
        rewards = torch.tensor([g.rewards for g in groups], dtype=torch.float32)  # [P, G]
        return self.advantage_fn(rewards)

    def log(self, step: int, groups: Sequence[Group], advantages: torch.Tensor,
            stats: dict[str, float]) -> dict[str, Any]:
        self.timings["timing/step"] = time.perf_counter() - self.step_started
        record = {"step": step, "time": time.time() - self.log_out.t0}
        record.update(step_metrics(groups, advantages, self.cfg.rollout.max_new_tokens))
        record.update(stats)
        record.update(self.timings)
        record.update(self.extras)
        record.update(self.engine.sync_metrics)   # e.g. the vLLM weight-sync canary
        record["tokens_per_s"] = record["completions/total_tokens"] / max(1e-9, self.timings["timing/step"])
        peak = self.device.peak_memory_gb()     # GPU only: CPU metrics files stay as they were
        if peak is not None:
            record["memory/peak_gb"] = peak
        self.log_out.write(record)
        for alarm in self.doctor.observe(step, record):
            self.log_out.write({"step": step, "event": "alarm", **alarm})
            self.bar.note(f"[alarm] step {step}: {alarm['name']}: {alarm['message']} -> {alarm['action']}")
        if self.cfg.run.transcripts_every and step % self.cfg.run.transcripts_every == 0:
            self.log_out.write_transcripts(step, groups, advantages)
        self.bar.update(step + 1, record)
        self._check_finite(step, stats)
        return record

    def _check_finite(self, step: int, stats: dict[str, float]) -> None:
        """Count updates skipped for NaN/inf (the doctor raises the alarm); stop after K in a row."""
        bad = any(isinstance(v, float) and v != v for v in stats.values())
        self.bad_steps = self.bad_steps + 1 if bad else 0
        if self.bad_steps >= self.cfg.run.max_bad_steps:
            raise UserError(f"stopping: {self.bad_steps} updates in a row had NaN/inf loss or "
                            f"gradients (step {step}); lower grpo.lr or check the model dtype")

    def evaluate(self, step: int) -> dict[str, Any]:
        max_new = self.cfg.eval.max_new_tokens or self.cfg.rollout.max_new_tokens
        with self.timed("eval"):
            result = greedy_accuracy(self.engine, self.heldout, self.verifiers, max_new)
            if self.cfg.eval.k:
                from rlvr.evaluation.ttc import ttc_metrics
                result.update(ttc_metrics(self.engine, self.heldout, self.verifiers, self.cfg.eval.k,
                                          max_new, self.seed_for(0, "eval"),
                                          self.cfg.rollout.temperature))
        self.log_out.write({"step": step, **result})
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
        from rlvr.training.resume import trainer_state
        state = trainer_state(self, done)             # a collective under FSDP2: every rank
        model_state = self.full_model_state()
        if not self.is_main:
            self.dp.barrier()                         # rank 0 writes; the others wait for it
            return checkpoint.path_for(self.ckpt_root, done)
        try:
            path = checkpoint.save(self.ckpt_root, done, self.policy, self.tokenizer, state, model_state)
            if self.dp is not None:
                self.dp.barrier()
        except OSError as exc:
            self.log_out.write({"step": done, "event": "alarm", "name": "checkpoint_failed",
                                "message": f"checkpoint write failed ({exc}); the previous one is intact",
                                "action": "free disk space or fix permissions on run.dir"})
            if self.dp is not None:
                self.dp.barrier()
            return self.best[1] or self.ckpt_root
        if metric is not None and metric > self.best[0]:
            self.best = (metric, path)
        checkpoint.prune(self.ckpt_root, self.cfg.run.keep_last, {self.best[1]} if self.best[1] else set())
        return path

    def full_model_state(self) -> dict[str, torch.Tensor] | None:
        """The gathered state dict under FSDP2 (every rank must call this); None otherwise."""
        if self.dp is None or self.dp.mode != "fsdp2":
            return None
        return self.dp.full_model_state(self.train_model)

    def _resume(self, ckpt: Path) -> None:
        from rlvr.training.resume import restore
        restore(self, ckpt)
        self.engine.load_weights(self.policy)

    def finish(self, wall_seconds: float) -> dict[str, Any]:
        model_state = self.full_model_state()
        for verifier in self.verifiers.values():  # stops verifier worker processes
            getattr(verifier, "close", lambda: None)()
        self.engine.close()   # Ray actors, a vLLM engine, sandboxes
        if not self.is_main:
            self.dp.barrier()
            self.dp.close()
            return {"steps": self.cfg.grpo.steps, "final_accuracy": None, "rank": self.dp.rank}
        final = self.dir / "final"
        self.policy.save_pretrained(final, state_dict=model_state)
        self.tokenizer.save_pretrained(final)
        evals = [r for r in read_metrics(self.dir) if "eval/accuracy" in r]
        summary = {"steps": self.cfg.grpo.steps, "final_accuracy": evals[-1]["eval/accuracy"] if evals else None,
                   "heldout_size": len(self.heldout), "wall_seconds": wall_seconds,
                   "best_checkpoint": str(self.best[1]) if self.best[1] else None}
        (self.dir / "summary.json").write_text(json.dumps(summary, indent=2))
        self.sampler.export(self.dir / "pass_rates.jsonl")
        self.log_out.close()
        if self.dp is not None:
            self.dp.barrier()
            self.dp.close()
        return summary

