"""Behaviour-policy mismatch on vLLM servers against the in-process engines, 10 GRPO steps each.

    PYTHONPATH=src .venv-vllm/bin/python -m experiments.vllm_servers_mismatch [steps=10]

Three settings, each trained from its own small SFT cold start of the built-in tiny model (cached
in runs/experiments/vllm_servers_mismatch/sft-*), same seed and config for every engine:
- `sync`: arithmetic (3 digits), rollouts on the current weights;
- `async k=1`: the same with `rollout.max_staleness: 1` (step s trains on samples of version s-1);
- `agent`: agent episodes (`data.task: agentic`, continued from token ids), every group trained on.
Engines: 2 vLLM servers (`vllm_server`), the in-process vLLM engine (`vllm`; it refuses async
and agent episodes at config time, so those rows have none) and the in-process HF engine (`hf`;
it samples from the trainer's own weights, so it has no canary: nothing to re-score).
Prints one markdown table: per run, `mismatch/kl` (trainer vs behaviour log-probs of the sampled
tokens, k3 estimate) and `mismatch/canary_kl` (each server re-scores one completion after each
weight push; the worst server), median and max over the steps that logged them, and the final
held-out accuracy (100 problems, greedy). Writes result.json beside the cold starts.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

OUT = Path("runs/experiments/vllm_servers_mismatch")
SETTINGS = {   # name: (cold start, extra rollout keys, extra grpo keys, task)
    "sync": ("arithmetic", "", "", "arithmetic"),
    "async k=1": ("arithmetic", ", max_staleness: 1", "", "arithmetic"),
    "agent": ("agentic", "", ", skip_zero_advantage: false", "agentic"),
}
ENGINES = {"vllm_server": ", vllm_servers: 2", "vllm": "", "hf": ""}


def _run(cmd: list[str], log: Path) -> int:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    with log.open("w") as f:
        return subprocess.run(cmd, env=env, stdout=f, stderr=subprocess.STDOUT).returncode


def cold_start(kind: str) -> Path:
    """The arithmetic cold start stops at 30 % on its probe; the agentic one is 10 SFT steps."""
    out = OUT / f"sft-{kind}"
    if not (out / "config.json").is_file():
        extra = ["--stop-accuracy", "0.3"] if kind == "arithmetic" else \
            ["--task", "agentic", "--steps", "10", "--batch-size", "16"]
        cmd = [sys.executable, "-m", "rlvr.cli", "sft", "--out", str(out), "--threads", "1", *extra]
        if _run(cmd, OUT / f"sft-{kind}.log") != 0:
            raise SystemExit(f"cold start {kind} failed: see {OUT / f'sft-{kind}.log'}")
    return out


def arm(setting: str, engine: str, steps: int) -> dict:
    kind, rollout, grpo, task = SETTINGS[setting]
    name = f"{setting.replace(' ', '').replace('=', '')}-{engine}"
    run_dir, cfg = OUT / name, OUT / f"{name}.yaml"
    cfg.write_text(
        "seed: 0\n"
        f"run: {{dir: {run_dir.resolve()}, eval_every: {steps}, save_every: 0, progress: false, "
        "threads: 1, report: false}\n"
        f"model: {{path: {cold_start(kind).resolve()}}}\n"
        f"data: {{task: {task}, difficulty: 3, heldout_size: 100}}\n"
        f"rollout: {{engine: {engine}, max_new_tokens: 48, "
        f"vllm_options: {{kv_cache_memory_bytes: 268435456}}{ENGINES[engine]}{rollout}}}\n"
        f"grpo: {{steps: {steps}, group_size: 8, prompts_per_step: 8, lr: 5.0e-5{grpo}}}\n"
        "agent: {max_turns: 3, max_tokens: 48, turn_tokens: 16}\n")
    start = time.time()
    rc = _run([sys.executable, "-m", "rlvr.cli", "train", str(cfg)], OUT / f"{name}.log")
    wall = time.time() - start
    if rc != 0:   # a refused combination exits with 2 and says why on its last line
        why = (OUT / f"{name}.log").read_text().strip().splitlines()[-1:]
        return {"setting": setting, "engine": engine, "rc": rc, "why": why[0] if why else ""}
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return {"setting": setting, "engine": engine, "rc": 0, "wall_s": round(wall),
            "kl": [r["mismatch/kl"] for r in lines if "mismatch/kl" in r],
            "canary": [r["mismatch/canary_kl"] for r in lines if "mismatch/canary_kl" in r],
            "heldout": next((r["eval/accuracy"] for r in reversed(lines) if "eval/accuracy" in r), None)}


def _cell(values: list[float]) -> str:
    return f"{statistics.median(values):.1e} / {max(values):.1e}" if values else "—"


def table(results: list[dict]) -> str:
    rows = ["| setting | engine | mismatch/kl median / max | canary_kl median / max | held-out | wall |",
            "| --- | --- | --- | --- | --- | --- |"]
    for r in results:
        if r["rc"]:
            why = f"refused (exit {r['rc']}): {r['why'][:90]}"
            rows.append(f"| {r['setting']} | {r['engine']} | {why} | | | |")
        else:
            acc = "—" if r["heldout"] is None else f"{r['heldout']:.2f}"
            rows.append(f"| {r['setting']} | {r['engine']} | {_cell(r['kl'])} ({len(r['kl'])} steps) | "
                        f"{_cell(r['canary'])} | {acc} | {r['wall_s']} s |")
    return "\n".join(rows)


def main(steps: int = 10) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    load = open("/proc/loadavg").read().split()[:3] if os.path.exists("/proc/loadavg") else []
    results = [arm(s, e, steps) for s in SETTINGS for e in ENGINES]
    (OUT / "result.json").write_text(json.dumps(results, indent=1))
    print(table(results))
    print(f"{steps} steps, 8 prompts x 8, seed 0; load average before {' '.join(load)}, after "
          f"{' '.join(open('/proc/loadavg').read().split()[:3]) if load else ''}")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
