"""The host memory policy of a CPU run, A/B: successive real-model updates on glibc's malloc under
each heap-trim period and on mimalloc, in fresh processes, on the same sequence of batches.

    python bench/host_memory.py --model DIR        # glibc:1 glibc:4 glibc:0 mimalloc, 12 updates each

One batch as `update_real.py` samples it (the smollm2 preset's shape: 8 word problems x 8 samples,
96 new tokens, advantages from N(0, 1)); update k trains a random subset of 40-64 of its rows (the
same subsets under every variant, so updates pair up across variants), as the rows with signal vary
from step to step in a run. A variant `glibc:p` runs on glibc's malloc and calls
`models.device.trim_host_heap()` before update k when k % p == 0, as `Device.reset_peak_memory(step)`
does at each step's start (p = 0: never); `mimalloc` runs with libmimalloc preloaded and its
options, as the `rlvr` command starts (`rlvr.cli.allocator`; the glibc trim is then a no-op). Each
variant runs in its own interpreter, one after another, so no heap carries over. Printed per
variant: the updates' total seconds (the first left out: it faults the whole working set in under
every variant), their system seconds and page faults, the peak RSS and the RSS after the last
update; then each total as a ratio to `glibc:1`'s (trimming at every step, what runs did before).
The last line is JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from stages import _rss_mb, cpu_name  # noqa: E402


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--updates", type=int, default=12)
    p.add_argument("--variants", nargs="+", default=["glibc:1", "glibc:4", "glibc:0", "mimalloc"],
                   help="glibc:P (trim before every P-th update, 0: never) or mimalloc")
    p.add_argument("--micro-batch-tokens", type=int, default=2048)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--child", nargs=2, metavar=("BATCH", "VARIANT"), help=argparse.SUPPRESS)
    return p.parse_args(argv)


def child(args) -> dict:
    """The updates under one variant, in this process (its allocator set by the parent); returns
    its figures."""
    import torch

    from rlvr.models.device import cpu_computes_bf16, host_allocator, trim_host_heap
    from rlvr.models.policy import load_policy
    from rlvr.models.batch import Batch
    from rlvr.training.update import Compute, UpdateSpec, update_policy

    torch.set_num_threads(args.threads)
    path, variant = args.child
    period = int(variant.split(":")[1]) if ":" in variant else 1
    model, _ = load_policy(args.model)
    batch = Batch(**torch.load(path))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, betas=(0.9, 0.99), weight_decay=0.0)
    compute, spec = Compute(micro_batch_tokens=args.micro_batch_tokens), UpdateSpec(temperature=0.7)
    gen, autocast = torch.Generator().manual_seed(0), cpu_computes_bf16()
    steps = []
    for k in range(args.updates):
        n = int(torch.randint(40, len(batch) + 1, (1,), generator=gen))
        rows = torch.randperm(len(batch), generator=gen)[:n].sort().values
        if period and k % period == 0:
            trim_host_heap()
        before, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        update_policy(model, optimizer, batch.rows(rows), spec, autocast=autocast, compute=compute)
        after = resource.getrusage(resource.RUSAGE_SELF)
        steps.append({"rows": n, "s": time.perf_counter() - t0, "sys_s": after.ru_stime - before.ru_stime,
                      "faults": after.ru_minflt - before.ru_minflt, "rss_gb": _rss_mb() / 1024})
        print(f"  {variant} update {k:2d}: {n} rows {steps[-1]['s']:.2f} s, system "
              f"{steps[-1]['sys_s']:.2f} s, {steps[-1]['faults']} faults, RSS {steps[-1]['rss_gb']:.2f} GB",
              flush=True)
    timed = steps[1:]
    return {"variant": variant, "allocator": host_allocator(), "update_s": sum(s["s"] for s in timed),
            "sys_s": sum(s["sys_s"] for s in timed),
            "faults": sum(s["faults"] for s in timed), "peak_rss_gb": resource.getrusage(
                resource.RUSAGE_SELF).ru_maxrss / 2**20, "final_rss_gb": steps[-1]["rss_gb"], "steps": steps}


def main(argv=None) -> dict:
    args = parse_args(argv)
    if args.child:
        print("RESULT " + json.dumps(child(args)), flush=True)
        return {}
    import torch
    from update_real import sample_batch

    from rlvr.cli.allocator import preload_env
    from rlvr.models.device import cpu_computes_bf16
    from rlvr.models.policy import load_policy

    torch.set_num_threads(args.threads)
    model, tokenizer = load_policy(args.model)
    sample_args = argparse.Namespace(prompts=8, group_size=8, max_new_tokens=96, temperature=0.7)
    batch = sample_batch(model, tokenizer, sample_args, cpu_computes_bf16())
    del model
    print(f"CPU: {cpu_name()}; native bf16: {cpu_computes_bf16()}; threads {args.threads}; "
          f"{args.updates} updates per variant; load {os.getloadavg()[0]:.2f}", flush=True)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "batch.pt")
        torch.save(vars(batch), path)
        for variant in args.variants:
            cmd = [sys.executable, __file__, "--model", args.model, "--updates", str(args.updates),
                   "--micro-batch-tokens", str(args.micro_batch_tokens), "--threads", str(args.threads),
                   "--child", path, variant]
            env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
            if variant == "mimalloc":   # as the `rlvr` command starts it, options included
                env = preload_env(env)
            out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env).stdout
            print("\n".join(line for line in out.splitlines() if not line.startswith("RESULT ")), flush=True)
            results.append(json.loads(next(ln for ln in out.splitlines() if ln.startswith("RESULT "))[7:]))
    base = next((r for r in results if r["variant"] == "glibc:1"), results[0])
    for r in results:
        r["speedup_vs_glibc_every_step"] = base["update_s"] / r["update_s"]
        print(f"{r['variant']} (ran on {r['allocator']}): updates 2..{args.updates} {r['update_s']:.1f} s "
              f"(x{r['speedup_vs_glibc_every_step']:.2f} vs {base['variant']}), system {r['sys_s']:.1f} s, "
              f"{r['faults']} page faults, peak RSS {r['peak_rss_gb']:.2f} GB, RSS at the end "
              f"{r['final_rss_gb']:.2f} GB", flush=True)
    out = {"cpu": cpu_name(), "native_bf16": cpu_computes_bf16(), "threads": args.threads,
           "load_avg_1min": os.getloadavg()[0], "variants": [{k: v for k, v in r.items() if k != "steps"}
                                                            for r in results]}
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
