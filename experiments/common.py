"""Shared plumbing for the experiments: cached SFT cold starts, problem files, curves, verdicts.

Every experiment starts from an SFT cold start of the built-in tiny model, cached under
`runs/experiments/sft-<name>` so the three experiments (and reruns) share it. Problem sets are
written as JSONL files that `data.train_path` / `data.eval_path` read. Nothing here downloads.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from rlvr.tasks.arithmetic import ArithmeticTask
from rlvr.types import Problem

ROOT = Path("runs/experiments")
_T0 = time.perf_counter()
CONFIGS = Path(__file__).resolve().parent / "configs"


def say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def built_once(path: Path, build: Callable[[], Path]) -> Path:
    """`path` if it holds a saved model, else build it; while another process holds the
    `.building` lock next to it (it is building the same thing), wait for that one instead.
    Lets seeds of one experiment run as parallel processes that share one cold start."""
    import os

    lock = path.parent / f".{path.name}.building"
    path.parent.mkdir(parents=True, exist_ok=True)
    while not (path / "config.json").is_file():
        try:   # O_EXCL: of processes starting together, exactly one takes the lock
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            try:
                os.kill(int(lock.read_text() or 0) or os.getpid(), 0)
            except (OSError, ValueError):   # that builder died: drop its lock and try again
                lock.unlink(missing_ok=True)
                continue
            time.sleep(20)
            continue
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        try:
            return build()
        finally:
            lock.unlink(missing_ok=True)
    return path


def cold_start(name: str, task, stop_accuracy: float, seed: int = 0, max_new_tokens: int = 48,
               min_steps: int = 100) -> Path:
    """SFT on `task.trace` until a held-out subset reaches `stop_accuracy`; cached by name."""
    out = ROOT / f"sft-{name}"
    return built_once(out / "sft", lambda: _cold_start(out, name, task, stop_accuracy, seed,
                                                       max_new_tokens, min_steps))


def _cold_start(out: Path, name: str, task, stop_accuracy: float, seed: int, max_new_tokens: int,
                min_steps: int) -> Path:
    from rlvr.evaluation.metrics import greedy_accuracy
    from rlvr.models.policy import load_policy
    from rlvr.rollout.hf import HFEngine
    from rlvr.training.sft import SFTConfig, sft, task_pairs
    from rlvr.tasks.arithmetic import ArithmeticVerifier
    from rlvr.models.tiny import save_tiny_model

    save_tiny_model(out / "init", seed=seed)
    model, tokenizer = load_policy(str(out / "init"))
    engine = HFEngine(model, tokenizer)
    probe = ArithmeticTask(3, "+").heldout(200, seed=99)

    def evaluate(step: int) -> float:
        acc = greedy_accuracy(engine, probe, {"arithmetic": ArithmeticVerifier()},
                              max_new_tokens)["eval/accuracy"]
        say(f"  sft[{name}] step {step}: strict held-out accuracy {acc:.1%}")
        model.train()
        return acc

    cfg = SFTConfig(steps=800, stop_accuracy=stop_accuracy, min_steps=min_steps, seed=seed)
    sft(model, tokenizer, task_pairs(task, tokenizer, cfg.batch_size, seed), cfg, evaluate=evaluate)
    model.save_pretrained(out / "sft")
    tokenizer.save_pretrained(out / "sft")
    return out / "sft"


def draw(rng: random.Random, digits: int, n: int, ops: str = "+", split: str = "train") -> list[Problem]:
    return ArithmeticTask(digits, ops).sample(rng, n, split)


def write_problems(path: Path, problems: Sequence[Problem], verifier: str = "arithmetic") -> Path:
    """JSONL rows `data.load_problems` reads; duplicates (same id) are dropped, order kept.
    Written to a temporary file and renamed, so parallel arms never read a half-written one."""
    import os

    path.parent.mkdir(parents=True, exist_ok=True)
    seen: set[str] = set()
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    with tmp.open("w") as f:
        for p in problems:
            if p.id in seen:
                continue
            seen.add(p.id)
            f.write(json.dumps({"id": p.id, "prompt": p.prompt, "reference": p.reference,
                                "verifier": verifier}) + "\n")
    os.replace(tmp, path)
    return path


def read_metrics(run_dir: Path) -> list[dict[str, Any]]:
    from rlvr.monitor.log import read_metrics as read
    return read(run_dir)


def curve(records: Sequence[dict], key: str) -> list[tuple[int, float]]:
    return [(r["step"], r[key]) for r in records if key in r and r.get(key) is not None
            and "event" not in r]


def mean_over(records: Sequence[dict], key: str, first: int, last: int) -> float:
    """Mean of `key` over step records with first <= step < last."""
    vals = [v for s, v in curve(records, key) if first <= s < last]
    return sum(vals) / len(vals) if vals else float("nan")


def run_arm(experiment: str, arm: str, overrides: Sequence[str], config: str = "base.yaml") -> list[dict]:
    """Train one arm from scratch in ROOT/experiment/arm and return its metrics lines."""
    import shutil

    from rlvr import config as config_mod
    from rlvr.train import train

    out = ROOT / experiment / arm
    if out.exists():
        shutil.rmtree(out)
    cfg = config_mod.load(CONFIGS / config, [f"run.dir={out}", *overrides])
    t0 = time.perf_counter()
    say(f"{experiment}/{arm}: {cfg.grpo.steps} steps")
    train(cfg)
    say(f"{experiment}/{arm}: done in {time.perf_counter() - t0:.0f} s")
    return read_metrics(out)


def accuracy_of(model_path: Path, problems_path: Path, max_new_tokens: int = 48) -> float:
    """Greedy held-out accuracy of a saved model (the step-0 point of a curve)."""
    from rlvr.data import load_problems
    from rlvr.evaluation.metrics import greedy_accuracy
    from rlvr.models.policy import load_policy
    from rlvr.rollout.hf import HFEngine
    from rlvr.tasks.arithmetic import ArithmeticVerifier

    model, tokenizer = load_policy(str(model_path))
    problems = load_problems(str(problems_path), "arithmetic")
    return greedy_accuracy(HFEngine(model, tokenizer), problems, {"arithmetic": ArithmeticVerifier()},
                           max_new_tokens)["eval/accuracy"]


def evals(records: Sequence[dict]) -> list[tuple[int, float]]:
    return [(r["step"], r["eval/accuracy"]) for r in records if "eval/accuracy" in r]


def alarms(records: Sequence[dict]) -> list[tuple[int, str]]:
    return [(r["step"], r["name"]) for r in records if r.get("event") == "alarm"]


def plot_panels(path: Path, panels: Sequence[tuple[str, dict[str, list[tuple[float, float]]]]]) -> None:
    """One panel per (y label, {legend: [(x, y), ...]}), stacked, written as a PNG."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 2.6 * len(panels)))
    FigureCanvasAgg(fig)
    for i, (label, series) in enumerate(panels):
        ax = fig.add_subplot(len(panels), 1, i + 1)
        for name, pts in series.items():
            if pts:
                ax.plot([x for x, _ in pts], [y for _, y in pts], label=name, marker=".")
        ax.set_ylabel(label)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def write_verdict(name: str, result: dict[str, Any], lines: Sequence[str],
                  plot: Callable[[Path], None] | None = None) -> Path:
    """ROOT/name/verdict.md (human) and result.json (numbers); `plot` draws curves.png."""
    import resource

    out = ROOT / name
    out.mkdir(parents=True, exist_ok=True)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    # A verdict rewritten from saved metrics keeps the cost of the run that produced them.
    result = {"process_cpu_seconds": round(usage.ru_utime + usage.ru_stime, 1),
              "process_wall_seconds": round(time.perf_counter() - _T0, 1), **result}
    lines = [*lines, "", f"Cost: {result['process_wall_seconds']:.0f} s wall, "
             f"{result['process_cpu_seconds']:.0f} s CPU (user + sys, all threads) for the whole command."]
    (out / "result.json").write_text(json.dumps(result, indent=2))
    (out / "verdict.md").write_text("\n".join(lines) + "\n")
    if plot is not None:
        try:
            plot(out / "curves.png")
        except Exception as exc:  # a missing plotting backend must not hide the verdict
            say(f"plot skipped: {exc!r}")
    for line in lines:
        print(line)
    return out / "verdict.md"
