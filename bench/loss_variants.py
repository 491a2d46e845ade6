"""The learning check of the loss variants (issue 27): 30-step quickstart-sized GRPO runs with the
default loss, GSPO and CISPO from one SFT cold start, at seeds 0 and 1, each arm's held-out gain
against the default's at the same seed.

    OMP_NUM_THREADS=1 python bench/loss_variants.py [--steps 30] [--seeds 0 1] [--mu 1] [--out DIR]

The cold start is `rlvr quickstart`'s (SFT until 20 % on a probe, cached in OUT/sft); every arm is
the quickstart preset (8 prompts x G=16, 48 new tokens, lr 5e-5, mu = 1) with grpo.steps=STEPS and
evaluates greedy accuracy on the same 500 held-out problems at the end. Arms (overrides):
- default: token-level PPO clip 0.2, token-mean;
- gspo: grpo.ratio_level=sequence, loss_agg=seq-mean-token-mean, eps 3e-4 / 4e-4 (the paper's);
- cispo: grpo.policy_loss=cispo, eps_high=4 (cap 5, as ScaleRL/TRL use), token-mean.
With mu = 1 the ratio is 1 at every update, so clipping is never active: GSPO differs from the
default by weighting each sequence's tokens 1/|y| (sequence-level gradient), while CISPO's gradient
equals PPO's exactly (−A·∇log π either way) and its run should repeat the default's.
`--mu 2` gives every arm (the default too) two optimisation passes per batch, so the second pass
sees ratios away from 1 and the clip (PPO, GSPO) or the capped weight (CISPO) acts. Runs one arm
at a time; prints one line per run and a JSON line last with every gain and the ratio
of each arm's gain to the default's (the check: >= 0.5 at every seed).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from rlvr import config as config_mod
from rlvr.cli.quickstart import DEFAULT_CONFIG, cold_start
from rlvr.evaluation.metrics import greedy_accuracy
from rlvr.models.policy import load_policy
from rlvr.rollout.hf import HFEngine
from rlvr.tasks.arithmetic import ArithmeticVerifier
from rlvr.tasks.base import build_task
from rlvr.train import train

ARMS = {
    "default": [],
    "gspo": ["grpo.ratio_level=sequence", "grpo.loss_agg=seq-mean-token-mean", "grpo.eps_low=3.0e-4",
             "grpo.eps_high=4.0e-4"],
    "cispo": ["grpo.policy_loss=cispo", "grpo.eps_high=4.0"],
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--mu", type=int, default=1)
    ap.add_argument("--out", default="runs/loss_variants")
    args = ap.parse_args()
    out = Path(args.out)
    base = config_mod.load(DEFAULT_CONFIG, [f"run.dir={out}"])
    if not (out / "sft" / "config.json").is_file():
        out.mkdir(parents=True, exist_ok=True)
        cold_start(base, out, 0.2, print)
    model, tokenizer = load_policy(str(out / "sft"))
    heldout = build_task(base).heldout(base.data.heldout_size)
    before = greedy_accuracy(HFEngine(model, tokenizer), heldout, {"arithmetic": ArithmeticVerifier()},
                             base.rollout.max_new_tokens)["eval/accuracy"]
    print(f"cold start: {before:.3f} greedy accuracy on {len(heldout)} held-out problems", flush=True)
    gains: dict[str, dict[int, float]] = {arm: {} for arm in ARMS}
    for seed in args.seeds:
        for arm, overrides in ARMS.items():
            cfg = config_mod.load(DEFAULT_CONFIG, [
                f"model.path={out / 'sft'}", f"run.dir={out / f'{arm}-mu{args.mu}-seed{seed}'}",
                f"seed={seed}", f"grpo.mu={args.mu}",
                f"grpo.steps={args.steps}", f"run.eval_every={args.steps}", "run.save_every=0",
                "run.resume=never", "run.report=false", "run.progress=false", *overrides])
            t0 = time.perf_counter()
            final = train(cfg)["final_accuracy"]
            gains[arm][seed] = final - before
            print(f"{arm:8s} seed {seed}: {before:.3f} -> {final:.3f} (gain {final - before:+.3f}) "
                  f"in {time.perf_counter() - t0:.0f} s", flush=True)
    ratios = {arm: {s: g / gains["default"][s] if gains["default"][s] else float("nan")
                    for s, g in by_seed.items()} for arm, by_seed in gains.items()}
    print(json.dumps({"cold_start": before, "steps": args.steps, "mu": args.mu, "gains": gains,
                      "ratio_to_default": ratios}))


if __name__ == "__main__":
    main()
