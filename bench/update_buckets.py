"""The packed update with and without its row buckets (`models.packed.bucketed`), on the updates
of a real run, each variant in a fresh process, alternating.

    python bench/update_buckets.py            # after bench/grpo_vs_trl.py made its cold start

What it does: trains the tiny model's cold start (`grpo_vs_trl.py`'s, seed 0; made here if
missing) for --steps steps with `grpo_vs_trl.py`'s rlvr configuration and saves every update's
batch. Then replays those updates from the same starting weights, --repeats times per variant,
alternating `buckets` (the packed sequence rounded up to a bucket) and `exact` (the real tokens
only), each replay in a new process on the allocator the `rlvr` command runs on. Prints per
replay the seconds of all updates after the first two, the process's system seconds and minor
page faults over them, and its resident memory at the end; then the medians and the ratio
exact ÷ buckets, and a JSON line. Why buckets: every new row count costs oneDNN a compiled
kernel per matmul shape and the allocator blocks of a size it has not handed out before.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def capture(args) -> None:
    """Train, saving (batch, update options) of every update and the weights before the first."""
    import torch

    import grpo_vs_trl as bench
    import rlvr.train
    import rlvr.training.state as state

    opts = bench.parse_args(["--steps", str(args.steps), "--seed", "0", "--workdir", args.workdir])
    sft = bench.cold_start_checkpoint(opts, bench.rlvr_config(opts, Path("unused"), Path("unused")), print)
    out = Path(args.workdir) / "update_buckets"
    out.mkdir(parents=True, exist_ok=True)
    plain, count = state.update_policy, [0]

    def saving(model, optimizer, batch, spec, **kw):
        if count[0] == 0:
            torch.save(model.state_dict(), out / "weights.pt")
        keep = {"autocast": kw["autocast"]}   # mu, minibatch_size, grad_clip: in the spec
        torch.save({"batch": batch, "spec": spec, "kw": keep, "compute": kw["compute"]}, out / f"{count[0]:03d}.pt")
        count[0] += 1
        return plain(model, optimizer, batch, spec, **kw)

    state.update_policy = saving
    rlvr.train.train(bench.rlvr_config(opts, sft, out / "run"))
    (out / "model").write_text(str(sft))
    print(f"captured {count[0]} updates in {out}")


def replay(args) -> None:
    """One variant's replay of the captured updates (run in its own process)."""
    import torch
    from transformers import AutoModelForCausalLM

    import grpo_vs_trl as bench
    from rlvr.models import packed
    from rlvr.training.update import update_policy

    torch.set_num_threads(1)
    packed.BUCKETS = args.variant == "buckets"
    out = Path(args.workdir) / "update_buckets"
    model = AutoModelForCausalLM.from_pretrained((out / "model").read_text(), dtype="float32")
    model.load_state_dict(torch.load(out / "weights.pt"))
    g = bench.rlvr_config(bench.parse_args([]), Path("unused"), Path("unused")).grpo   # the run's AdamW
    optimizer = torch.optim.AdamW(model.parameters(), lr=g.lr, betas=g.adam_betas, weight_decay=g.weight_decay)
    files = sorted(out.glob("[0-9][0-9][0-9].pt"))
    seconds, before = 0.0, None
    for i, f in enumerate(files):
        saved = torch.load(f, weights_only=False)
        if i == 2:   # the first two updates build the process's first kernels either way
            before = resource.getrusage(resource.RUSAGE_SELF)
        start = time.perf_counter()
        update_policy(model, optimizer, saved["batch"], saved["spec"], compute=saved["compute"],
                      generator=torch.Generator().manual_seed(i), **saved["kw"])
        seconds += (time.perf_counter() - start) if i >= 2 else 0.0
    after = resource.getrusage(resource.RUSAGE_SELF)
    rss = int(Path("/proc/self/status").read_text().split("VmRSS:")[1].split()[0]) // 1024
    print(json.dumps({"variant": args.variant, "updates": len(files) - 2, "seconds": seconds,
                      "system_s": after.ru_stime - before.ru_stime,
                      "minor_faults": after.ru_minflt - before.ru_minflt, "rss_mb": rss}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--workdir", help="default: grpo_vs_trl.py's (its cold start is reused)")
    ap.add_argument("--variant", choices=["buckets", "exact"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    import grpo_vs_trl

    args.workdir = args.workdir or grpo_vs_trl.parse_args([]).workdir
    if args.variant:
        return replay(args)
    if not (Path(args.workdir) / "update_buckets" / "weights.pt").is_file():
        capture(args)
    from stages import cpu_name

    print(f"CPU: {cpu_name()}; native bf16: {grpo_vs_trl.native_bf16()} (the run's precision follows it)")
    rows: dict[str, list[dict]] = {"buckets": [], "exact": []}
    for _ in range(args.repeats):
        for variant in rows:
            out = subprocess.run([sys.executable, __file__, "--workdir", args.workdir, "--variant", variant],
                                 check=True, capture_output=True, text=True).stdout
            row = json.loads(out.strip().splitlines()[-1])
            rows[variant].append(row)
            print(f"{variant:8s} {row['seconds']:.2f} s for {row['updates']} updates; system {row['system_s']:.2f} s; "
                  f"{row['minor_faults']} minor faults; RSS {row['rss_mb']} MB", flush=True)
    med = {v: {k: statistics.median(r[k] for r in rs) for k in ("seconds", "system_s", "minor_faults", "rss_mb")}
           for v, rs in rows.items()}
    ratio = med["exact"]["seconds"] / med["buckets"]["seconds"]
    print(f"median: buckets {med['buckets']['seconds']:.2f} s, exact {med['exact']['seconds']:.2f} s: "
          f"{ratio:.2f}x with buckets; load {os.getloadavg()[0]:.1f}")
    print(json.dumps({"median": med, "ratio": ratio, "runs": rows, "load_avg_1min": os.getloadavg()[0]}))


if __name__ == "__main__":
    from rlvr.cli.allocator import reexec_preloaded

    reexec_preloaded([__file__, *sys.argv[1:]])
    main()
