"""Does one rlvr update equal one TRL update? Both loss computations on IDENTICAL batches.

Run (from the repository root, in a venv with TRL; see bench/README.md):

    .venv-bench/bin/python bench/parity_trl.py --steps 30 --seed 0

TRL's `GRPOTrainer` trains as in `grpo_vs_trl.py`. At every step, on the batch TRL just sampled
and on TRL's weights of that moment (before its update), rlvr's loss path (`rlvr.training.update`:
zero-advantage rows skipped, token-mean over every completion token, fused forward) computes the
loss and the gradient in fp32 and under bf16, with TRL's advantages and with rlvr's (population
std); printed next to TRL's own logged loss and pre-clip gradient norm, with the cosine between
rlvr's and an fp32 reference gradient. Separately, two copies of the cold-start checkpoint train
with rlvr's `update_policy` (AdamW, same hyper-parameters, fp32 and bf16) on TRL's batches in
TRL's order ("replay"): if their held-out accuracy after N steps matches TRL's, the update rules
are equivalent and any gap in the benchmark comes from the sampled completions, not the update.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import math
import statistics
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("grpo_vs_trl", REPO / "bench" / "grpo_vs_trl.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def _loss_and_grad(model, batch, adv, autocast: bool):
    """rlvr's loss on this batch (as update_policy computes it, μ = 1) and its gradient."""
    from rlvr.algo.losses import LossSpec, grpo_loss
    from rlvr.training.update import _logp_and_entropy

    norm = float(batch.completion_mask.sum())
    rows = torch.nonzero(adv != 0).squeeze(-1)
    params = [p for p in model.parameters() if p.requires_grad]
    if rows.numel() == 0:
        return 0.0, [torch.zeros_like(p) for p in params]
    b = copy.copy(batch)
    b.advantages = adv
    work = b.rows(rows).trimmed()
    logp, _ = _logp_and_entropy(model, work, 1.0, autocast)
    loss, _ = grpo_loss(logp, logp.detach(), work.advantages, work.completion_mask.float(),
                        LossSpec(eps_low=0.2, eps_high=0.2), norm=norm)
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    return float(loss.detach()), [torch.zeros_like(p) if g is None else g for g, p in zip(grads, params)]


def _norm(grads) -> float:
    return float(torch.linalg.vector_norm(torch.stack([g.float().norm() for g in grads])))


def _cos(a, b) -> float:
    dot = sum(float((x.float() * y.float()).sum()) for x, y in zip(a, b))
    return dot / max(1e-30, _norm(a) * _norm(b))


VARIANTS = ("fp32_trl_adv", "bf16_trl_adv", "fp32_rlvr_adv")


class Replay:
    """A copy of the start checkpoint trained by rlvr's update_policy on TRL's batches."""

    def __init__(self, model, args, autocast: bool):
        from rlvr.algo.kl import kl_k3
        from rlvr.algo.losses import LossSpec, token_mean
        from rlvr.training.update import UpdateSpec

        self.model, self.autocast = copy.deepcopy(model), autocast
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=args.lr, betas=(0.9, 0.99), weight_decay=0.0)
        self.spec = UpdateSpec(LossSpec(kl_fn=kl_k3, agg_fn=token_mean, eps_low=0.2, eps_high=0.2,
                                        dual_clip=0.0, beta=0.0, entropy_coef=0.0),
                               temperature=1.0, grad_clip=1.0)
        self.grad_norms: list[float] = []

    def step(self, batch) -> None:
        from rlvr.training.update import update_policy

        stats = update_policy(self.model, self.opt, batch, self.spec, autocast=self.autocast)
        self.grad_norms.append(stats.get("grad_norm", 0.0))


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workdir", default=str(REPO / "runs" / "bench_grpo_vs_trl"))
    p.add_argument("--heldout", type=int, default=200)
    p.add_argument("--bf16", action="store_true", help="also the bf16 loss path and a bf16 replay "
                   "(slow on CPUs without native bf16)")
    own = p.parse_args(argv)
    args = bench.parse_args(["--steps", str(own.steps), "--seed", str(own.seed), "--workdir", own.workdir,
                             "--heldout", str(own.heldout)])
    bench._require_trl()
    from rlvr import config as config_mod
    from rlvr.models.policy import load_policy
    from rlvr.models.quiet import quiet_transformers
    from rlvr.sampling.sampler import TaskSampler
    from rlvr.tasks.base import build_task
    from rlvr.training.setup import set_threads
    from rlvr.models.batch import Batch

    quiet_transformers()
    set_threads(args.threads)
    cfg = bench.rlvr_config(args, Path("builtin:tiny-llama"), Path(args.workdir) / "rlvr")
    sft = bench.cold_start_checkpoint(args, cfg, print)
    cfg = config_mod.replace(cfg, [f"model.path={sft}"])
    task = build_task(cfg)
    sampler = TaskSampler(task, args.prompts, args.seed)
    problems = [q for s in range(args.steps) for q in sampler.next_batch(s)]
    start, tokenizer = load_policy(str(sft))
    replays = {"replay_fp32": Replay(start, args, False)}
    if own.bf16:
        replays["replay_bf16"] = Replay(start, args, True)
    variants = [v for v in VARIANTS if own.bf16 or "bf16" not in v]

    baton = bench.Baton()
    baton.rlvr_turn.release = lambda: None          # no rlvr thread: TRL never waits
    baton.trl_turn.acquire = lambda: None
    trainer = bench.trl_trainer(args, sft, problems, Path(args.workdir) / "trl_parity", baton, [])
    rows: list[dict] = []
    inner = trainer._compute_loss

    def probing_loss(model, inputs):
        batch = Batch(inputs["prompt_ids"], inputs["prompt_mask"], inputs["completion_ids"],
                      inputs["completion_mask"], inputs["advantages"].float(),
                      torch.zeros(inputs["completion_ids"].shape))
        # TRL shuffles the generation batch before the loss, so rows no longer follow the reward
        # order; rlvr's population-std advantage is TRL's unbiased-std one times sqrt(G/(G-1))
        # (up to the two eps terms, < 1e-3 relative for 0/1 rewards and G = 8).
        rlvr_adv = batch.advantages * math.sqrt(args.group_size / (args.group_size - 1))
        row = {"step": len(rows), "active_rows": int((batch.advantages != 0).sum()),
               "tokens": int(inputs["num_items_in_batch"])}
        ref_loss, ref = _loss_and_grad(model, batch, batch.advantages, False)
        row["fp32_trl_adv"] = {"loss": ref_loss, "grad_norm": _norm(ref)}
        for name, adv, ac in (("bf16_trl_adv", batch.advantages, True), ("fp32_rlvr_adv", rlvr_adv, False)):
            if name not in variants:
                continue
            loss, g = _loss_and_grad(model, batch, adv, ac)
            row[name] = {"loss": loss, "grad_norm": _norm(g), "cos_to_fp32": _cos(g, ref)}
        for name, r in replays.items():
            b = copy.copy(batch)
            b.advantages = rlvr_adv
            r.step(b)
        rows.append(row)
        logged = [r for r in trainer.state.log_history if "grad_norm" in r]
        if len(rows) >= 2 and len(logged) >= len(rows) - 1:   # TRL logs a step after its update
            print(json.dumps({**rows[-2], "trl": {"loss": logged[len(rows) - 2]["loss"],
                                                  "grad_norm": logged[len(rows) - 2]["grad_norm"]}}), flush=True)
        return inner(model, inputs)

    trainer._compute_loss = probing_loss
    trainer.train()
    logs = [r for r in trainer.state.log_history if "grad_norm" in r]
    for row, log in zip(rows, logs):
        row["trl"] = {"loss": log["loss"], "grad_norm": log["grad_norm"]}
    print(json.dumps(rows[-1]), flush=True)

    def clipped(xs):
        return sum(x > 1.0 for x in xs) / len(xs)

    trl_norms = [r["trl"]["grad_norm"] for r in rows]
    summary = {"seed": args.seed, "steps": args.steps,
               "grad_norm_median": {"trl": statistics.median(trl_norms),
                                    **{k: statistics.median(r[k]["grad_norm"] for r in rows)
                                       for k in variants}},
               "grad_clipped_fraction": {"trl": clipped(trl_norms),
                                         **{k: clipped([r[k]["grad_norm"] for r in rows])
                                            for k in variants}},
               "max_rel_grad_norm_diff_fp32_vs_trl": max(abs(r["fp32_trl_adv"]["grad_norm"] / r["trl"]["grad_norm"] - 1)
                                                         for r in rows if r["trl"]["grad_norm"] > 0),
               "min_cos_rlvr_adv_vs_trl_adv": min(r["fp32_rlvr_adv"]["cos_to_fp32"] for r in rows if r["active_rows"])}
    if own.bf16:
        summary["min_cos_bf16_vs_fp32"] = min(r["bf16_trl_adv"]["cos_to_fp32"] for r in rows if r["active_rows"])
    heldout = task.heldout(args.heldout)
    summary["heldout"] = {"start": bench.heldout_accuracy(start, tokenizer, heldout, args.max_new_tokens),
                          "trl": bench.heldout_accuracy(trainer.model, tokenizer, heldout, args.max_new_tokens),
                          **{k: bench.heldout_accuracy(r.model, tokenizer, heldout, args.max_new_tokens)
                             for k, r in replays.items()}}
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
