"""The built-in agentic task learned on CPU: SFT cold start, then GRPO on episodes with read-only
tests scored on hidden tests.  Run: `python -m experiments.agentic_task [steps] [sft_steps]`.

Reports held-out success (original tests, 100 problems) before and after GRPO, both greedy and
sampled at temperature 1 (one episode per problem, fixed seed), turns per episode and seconds per
step. Same cold start recipe and hyper-parameters as experiments/tamper.py (whose traces include
a 20 % share of tamper episodes, refused here). Writes runs/experiments/agentic_task/verdict.md.
"""

from __future__ import annotations

import os
import sys

import torch

from experiments.common import say, write_verdict
from experiments.tamper import BUDGET, GROUP, HELDOUT, PROMPTS, cold_start, run_arm, summary
from experiments.episodes import evaluate
from rlvr.agents.workspace import Workspace
from rlvr.rollout.base import SamplingParams
from rlvr.tasks.agentic import AgenticTask

NAME = "agentic_task"


def sampled_success(path: str, heldout, pool) -> float:
    from rlvr.models.policy import load_policy
    from rlvr.rollout.hf import HFEngine

    model, tok = load_policy(path)
    res = evaluate(HFEngine(model, tok), tok, heldout, lambda p: Workspace(pool), BUDGET,
                   SamplingParams(temperature=1.0))
    return res["eval/success"]


def main(steps: int = 15, sft_steps: int = 150) -> None:
    from rlvr.verifiers.sandbox import SandboxPool

    torch.set_num_threads(1)
    task = AgenticTask(3)
    heldout = task.heldout(HELDOUT)
    path = cold_start(task, sft_steps)
    with SandboxPool(1, timeout_s=5.0) as pool:
        before = sampled_success(path, heldout, pool)
        arm = run_arm("readonly", path, task, pool, steps, heldout, save_to=f"{NAME}/final")
        after = sampled_success(arm["saved"], heldout, pool)
    s = summary(arm["records"], max(1, steps // 5))
    lines = [f"# Built-in agentic task: {sft_steps} SFT steps, then {steps} GRPO steps "
             f"({PROMPTS}x{GROUP} episodes/step, read-only + hidden tests)", "",
             f"- held-out success, greedy: {s['heldout_success_before']:.0%} → {s['heldout_success_after']:.0%}",
             f"- held-out success, sampled (T=1): {before:.0%} → {after:.0%}",
             f"- training reward (mean of first → last steps): {s['reward_first']:.2f} → {s['reward_last']:.2f}",
             f"- tamper rate in training episodes: {s['tamper_rate_first']:.1%} → {s['tamper_rate_last']:.1%}",
             f"- {s['turns_per_episode']:.2f} model turns per episode, {s['seconds_per_step']:.1f} s per "
             "GRPO step (1 torch thread, 1 sandbox worker, shared loaded 2-core machine)"]
    say(f"{NAME}: done")
    write_verdict(NAME, {"steps": steps, "sft_steps": sft_steps, "sampled_success_before": before,
                         "sampled_success_after": after, **s}, lines)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main(*(int(a) for a in sys.argv[1:3]))
