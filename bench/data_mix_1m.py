"""Loading a 1M-row parquet mixture: peak RSS and time to the first step of `rlvr train`.

Writes two sources in the hub's layout under OUT (700k GSM8K-style question/answer rows, 300k
problem/answer rows; 1024-row row groups), then runs `rlvr train` on the built-in tiny model with
`data.mix` over both for one step, twice: cold (datasets builds its Arrow cache) and warm (cache
reused), after a baseline on 1,000 rows in the same layout. Prints, per run: seconds from launch to
the first metrics line, and that process's peak RSS.

    python bench/data_mix_1m.py /tmp/i46-1m
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

from rlvr.testing.hub_layout import write_hub_layout


# rlvr's CLI, then its own peak RSS on stderr (RUSAGE_CHILDREN would keep the largest child so far)
PROBE = ("import resource, sys; from rlvr.cli.main import main; code = main(sys.argv[1:]); "
         "rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024; "
         "sys.stderr.write(f'peak_rss_mib={rss:.0f}\\n'); sys.exit(code)")


def rows(n: int, seed: int, gsm: bool) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        a, b = rng.randint(100, 9999), rng.randint(100, 9999)
        q = f"Ann has {a} apples and buys {b} more. How many apples does she have?"
        out.append({"question": q, "answer": f"{a}+{b}=<<{a}+{b}={a + b}>>{a + b}\n#### {a + b:,}"}
                   if gsm else {"problem": q, "answer": str(a + b)})
    return out


def run_once(out: Path, tag: str) -> tuple[float, float]:
    """(seconds to the first metrics line, peak RSS in MiB) of one `rlvr train` step in a fresh
    process (a new interpreter per run, so each RSS is that run's own)."""
    run_dir = out / f"run-{tag}"
    shutil.rmtree(run_dir, ignore_errors=True)
    if tag in ("small", "cold"):
        shutil.rmtree(out / "cache", ignore_errors=True)
    root = out / "small" if tag == "small" else out
    mix = [{"path": str(root / "gsm"), "config": "main", "weight": 0.7},
           {"path": str(root / "pa"), "config": "main", "weight": 0.3}]
    cmd = [sys.executable, "-c", PROBE, "train", "quickstart", "model.path=builtin:tiny-llama",
           "data.task=", f"data.mix={json.dumps(mix)}",
           f"run.dir={run_dir}", "grpo.steps=1", "grpo.prompts_per_step=4", "grpo.group_size=2",
           "rollout.max_new_tokens=8", "data.heldout_size=0", "run.report=false", "run.progress=false",
           "run.threads=1"]
    env = {**os.environ, "HF_DATASETS_CACHE": str(out / "cache"), "HF_HUB_OFFLINE": "1",
           "HF_DATASETS_DISABLE_PROGRESS_BARS": "1"}
    start = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    first = None
    while proc.poll() is None:
        if first is None and (run_dir / "metrics.jsonl").exists() and \
                (run_dir / "metrics.jsonl").read_text().strip():
            first = time.monotonic() - start
        time.sleep(0.05)
    if proc.returncode:
        raise SystemExit(proc.stderr.read()[-2000:])
    first = first if first is not None else time.monotonic() - start
    return first, float(proc.stderr.read().rsplit("peak_rss_mib=", 1)[-1].split()[0])


def main(out: Path) -> None:
    if not (out / "gsm").exists():
        write_hub_layout(out / "gsm", {"train": rows(700_000, 0, True)}, "main", row_group_size=1024)
        write_hub_layout(out / "pa", {"train": rows(300_000, 1, False)}, "main", row_group_size=1024)
    if not (out / "small").exists():
        write_hub_layout(out / "small" / "gsm", {"train": rows(700, 0, True)}, "main")
        write_hub_layout(out / "small" / "pa", {"train": rows(300, 1, False)}, "main")
    size = sum(f.stat().st_size for f in out.glob("[gp]*/**/*.parquet")) / 2**20
    print(f"1,000,000 rows, {size:.1f} MiB of parquet; small: the same layout with 1,000 rows")
    for tag in ("small", "cold", "warm"):
        first, rss = run_once(out, tag)
        print(f"{tag}: first step after {first:.1f} s, peak RSS {rss:.0f} MiB")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/rlvr-1m"))
