"""`rlvr quickstart`: build the tiny model, a deliberately partial SFT cold start, GRPO, and a table.

Stages, all under `runs/quickstart/`: `init/` (random tiny Llama), `sft/` (cold start: reasoner
traces until a held-out subset reaches `stop_accuracy`, so RL has signal but much left to learn),
then GRPO with the `quickstart` preset (`rlvr/configs/quickstart.yaml`, package data) in the run
directory itself, and `summary.json`.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from rlvr import config as config_mod
from rlvr.evaluation.metrics import greedy_accuracy
from rlvr.models.policy import load_policy
from rlvr.rollout.hf import HFEngine
from rlvr.tasks.base import build_task
from rlvr.training.setup import set_threads
from rlvr.training.sft import SFTConfig, sft, task_pairs, task_probe
from rlvr.tasks.arithmetic import ArithmeticVerifier
from rlvr.models.tiny import save_tiny_model
from rlvr.train import train

DEFAULT_CONFIG = config_mod.PRESETS / "quickstart.yaml"


def cold_start(cfg, out: Path, stop_accuracy: float, say) -> float:
    """SFT from the reasoner's traces until a 200-problem held-out subset reaches stop_accuracy."""
    task = build_task(cfg)
    save_tiny_model(out / "init", seed=cfg.seed)
    model, tokenizer = load_policy(str(out / "init"))

    def report(step: int, acc: float) -> None:
        if step % 50 == 0 or acc >= stop_accuracy:
            say(f"  sft step {step:4d}: held-out subset accuracy {acc:.1%}")

    evaluate = task_probe(model, tokenizer, task, max_new_tokens=cfg.rollout.max_new_tokens,
                          report=report)

    # At least 200 steps: a model that has only just begun to solve problems greedily samples
    # almost no correct answers at temperature 1, and GRPO then has too little signal.
    sft_cfg = SFTConfig(steps=800, stop_accuracy=stop_accuracy, min_steps=200, eval_every=5,
                        seed=cfg.seed)
    result = sft(model, tokenizer, task_pairs(task, tokenizer, sft_cfg.batch_size, cfg.seed), sft_cfg,
                 evaluate=evaluate)
    model.save_pretrained(out / "sft")
    tokenizer.save_pretrained(out / "sft")
    return result["steps"]


def quickstart(config_path: str | Path | None = None, overrides=(), stop_accuracy: float = 0.2,
               say=print) -> dict:
    t0 = time.perf_counter()
    cfg = config_mod.load(config_path or DEFAULT_CONFIG, overrides)
    out = Path(cfg.run.dir)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    set_threads(cfg.run.threads)
    say(f"[1/3] cold start: SFT on reasoner traces until {stop_accuracy:.0%} held-out accuracy")
    sft_steps = cold_start(cfg, out, stop_accuracy, say)
    cfg = config_mod.replace(cfg, [f"model.path={out / 'sft'}", "run.resume=never"])
    model, tokenizer = load_policy(str(out / "sft"))
    heldout = build_task(cfg).heldout(cfg.data.heldout_size)
    before = greedy_accuracy(HFEngine(model, tokenizer), heldout, {"arithmetic": ArithmeticVerifier()},
                             cfg.rollout.max_new_tokens)["eval/accuracy"]
    say(f"[2/3] GRPO: {cfg.grpo.steps} steps, {cfg.grpo.prompts_per_step} prompts x "
        f"G={cfg.grpo.group_size}; cold-start accuracy {before:.1%} on {len(heldout)} held-out problems")
    result = train(cfg)
    summary = {"cold_start_accuracy": before, "final_accuracy": result["final_accuracy"],
               "heldout_size": len(heldout), "sft_steps": sft_steps, "grpo_steps": cfg.grpo.steps,
               "wall_seconds": round(time.perf_counter() - t0, 1), "run_dir": str(out)}
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    say("[3/3] done")
    _table(summary, say)
    return summary


def _table(summary: dict, say) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="rlvr quickstart: 3-digit addition, tiny Llama, 2 CPU cores")
    for col in ("stage", "held-out greedy accuracy", "problems"):
        table.add_column(col)
    table.add_row(f"cold start (SFT, {summary['sft_steps']} steps)",
                  f"{summary['cold_start_accuracy']:.1%}", str(summary["heldout_size"]))
    table.add_row(f"after GRPO ({summary['grpo_steps']} steps)",
                  f"{summary['final_accuracy']:.1%}", str(summary["heldout_size"]))
    Console().print(table)
    say(f"wall time {summary['wall_seconds']:.0f} s; artifacts in {summary['run_dir']}/")
