"""The update on a real checkpoint against its arithmetic floor, and the update's peak memory.

Run (from the repository root; a local Llama-family instruct checkpoint, e.g. SmolLM2-135M-Instruct):

    python bench/update_real.py --model DIR                 # the smollm2 preset's batch: 8 x 8, 96 tokens
    python bench/update_real.py --model DIR --micro-batch-tokens 0    # the whole minibatch at once

One batch as the smollm2 preset trains it: `--prompts` word-problem prompts x `--group-size` samples
from the model through rlvr's engine (temperature 0.7, `--max-new-tokens`), advantages drawn from
N(0, 1) for every row, so every row carries signal (the most tokens an update of this batch
processes). The update is `rlvr.training.update.update_policy` as `train()` runs it: AdamW, token-mean,
clip 0.2, one optimizer step, bf16 matrices where the CPU computes bf16 natively (detected), micro-
batches of at most `--micro-batch-tokens` padded tokens.

The floor: 6 x P x T FLOPs, P the parameters that multiply (every linear layer, the tied output layer
once), T the real (unpadded) prompt + completion tokens of the rows trained (and, stricter, T = the
completion tokens only, the ones that carry loss), at the matmul rate measured in the same run:
forward and backward (input and weight gradients) of every linear layer at one micro-batch's token
count, in the update's dtype. Update and rate measurement alternate, repeat by repeat; medians.
It runs on the allocator the `rlvr` command runs on (mimalloc where installed; RLVR_ALLOCATOR=system:
glibc's). On glibc the C heap is trimmed before repeat k when k is a multiple of `TRIM_EVERY_STEPS`,
as a run trims it at those steps' starts (`Device.reset_peak_memory`): the first repeat is an
update after a trim, the slowest (it faults its whole working set in), later ones reuse the heap;
`--trim-every 1` trims before every repeat (what runs did before; `host_memory.py` compares the
periods and allocators over more updates).
Peak RSS is sampled every 20 ms while each part runs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from stages import RssByTurn, cpu_name  # noqa: E402


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--prompts", type=int, default=8)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--max-new-tokens", type=int, default=96)
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--micro-batch-tokens", type=int, default=2048)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--fp32", action="store_true", help="float32 matrices even where bf16 is native")
    p.add_argument("--no-heap-kept", action="store_true", help="the update without `device.host_heap_kept` "
                   "(large blocks mmap'd afresh per micro-batch, as glibc does by itself): its A/B")
    p.add_argument("--trim-every", type=int, default=0, help="trim the C heap before every k-th repeat "
                   "(default: the run's own period, `models.device.TRIM_EVERY_STEPS`)")
    p.add_argument("--profile", action="store_true", help="after the timed repeats, one more update under "
                   "torch.profiler: the 25 ops with the most self time")
    return p.parse_args(argv)


def sample_batch(model, tokenizer, args, autocast: bool):
    import torch

    from rlvr.rollout.base import SamplingParams
    from rlvr.rollout.hf import HFEngine
    from rlvr.tasks.word_problems import WordProblemsTask
    from rlvr.models.batch import build_batch

    engine = HFEngine(model, tokenizer, autocast_bf16=autocast)
    problems = WordProblemsTask().sample(random.Random(0), args.prompts)
    params = SamplingParams(temperature=args.temperature, max_new_tokens=args.max_new_tokens)
    groups = engine.generate(problems, args.group_size, params, seed=0)
    advantages = torch.randn(args.prompts, args.group_size, generator=torch.Generator().manual_seed(0))
    return build_batch(groups, advantages, engine.pad_id)


def matmul_rate(model, dtype, tokens: int) -> float:
    """FLOP/s of forward + backward of every linear layer at `tokens` rows, in `dtype`."""
    import torch
    import torch.nn.functional as F

    gen = torch.Generator().manual_seed(0)
    weights = [m.weight.detach().to(dtype).requires_grad_() for m in model.modules()
               if isinstance(m, torch.nn.Linear)]
    xs = [torch.randn(tokens, w.shape[1], generator=gen).to(dtype).requires_grad_() for w in weights]
    t0 = time.perf_counter()
    sum(F.linear(x, w).float().sum() for x, w in zip(xs, weights)).backward()
    return 6 * sum(w.numel() for w in weights) * tokens / (time.perf_counter() - t0)


def profile_update(update) -> None:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        update()
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25), flush=True)


def main(argv=None) -> dict:
    args = parse_args(argv)
    import torch

    from rlvr.models.device import TRIM_EVERY_STEPS, cpu_computes_bf16, host_allocator, trim_host_heap
    from rlvr.models.policy import load_policy
    from rlvr.training import update
    from rlvr.training.update import Compute, UpdateSpec, update_policy

    if args.no_heap_kept:
        update.host_heap_kept = contextlib.nullcontext
    torch.set_num_threads(args.threads)
    native = cpu_computes_bf16()
    autocast = native and not args.fp32
    dtype = torch.bfloat16 if autocast else torch.float32
    model, tokenizer = load_policy(args.model)
    rss = RssByTurn()
    rss.turn = "sample"
    batch = sample_batch(model, tokenizer, args, autocast)
    real = int(batch.prompt_mask.sum() + batch.completion_mask.sum())
    trained = int(batch.train_mask().sum())   # the completion tokens, the ones that carry loss
    padded = batch.prompt_ids.numel() + batch.completion_ids.numel()
    params = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    print(f"CPU: {cpu_name()}; native bf16: {native}; update in {dtype}; threads {args.threads}; "
          f"allocator {host_allocator()}; load {os.getloadavg()[0]:.2f}", flush=True)
    print(f"batch: {len(batch)} rows, {real} real tokens ({trained} of them completion tokens; {padded} "
          f"padded), {params / 1e6:.1f}M "
          f"multiplying parameters", flush=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, betas=(0.9, 0.99), weight_decay=0.0)
    compute = Compute(micro_batch_tokens=args.micro_batch_tokens)
    rate_tokens = args.micro_batch_tokens or padded
    secs, rates = [], []
    trim_every = args.trim_every or TRIM_EVERY_STEPS
    for repeat in range(args.repeats):
        if repeat % trim_every == 0:
            trim_host_heap()   # as a run does at those steps' starts
        rss.turn = "update"
        t0 = time.perf_counter()
        update_policy(model, optimizer, batch, UpdateSpec(temperature=args.temperature), autocast=autocast,
                      compute=compute)
        secs.append(time.perf_counter() - t0)
        rss.turn = "floor"
        rates.append(matmul_rate(model, dtype, rate_tokens))
    peaks = rss.stop()
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt   # the whole process: compare A/B only
    if args.profile:
        profile_update(lambda: update_policy(model, optimizer, batch, UpdateSpec(temperature=args.temperature),
                                             autocast=autocast, compute=compute))
    update_s, rate = statistics.median(secs), statistics.median(rates)
    floor_s, strict_s = 6 * params * real / rate, 6 * params * trained / rate
    out = {"cpu": cpu_name(), "native_bf16": native, "dtype": str(dtype), "threads": args.threads,
           "rows": len(batch), "real_tokens": real, "completion_tokens": trained, "padded_tokens": padded,
           "params": params,
           "micro_batch_tokens": args.micro_batch_tokens, "update_s": update_s,
           "update_range_s": [min(secs), max(secs)], "matmul_gflops": rate / 1e9, "floor_s": floor_s,
           "of_floor": floor_s / update_s,
           "strict_floor_s": strict_s, "of_strict_floor": strict_s / update_s, "peak_rss_mb": peaks,
           "heap_kept": not args.no_heap_kept, "trim_every": trim_every, "allocator": host_allocator(),
           "process_minor_faults": faults,
           "load_avg_1min": os.getloadavg()[0]}
    print(f"update {update_s:.2f} s [{min(secs):.2f}, {max(secs):.2f}]; floor 6 x P x T = "
          f"{floor_s:.2f} s at {rate / 1e9:.0f} GFLOP/s (measured here): {out['of_floor']:.0%} of floor; "
          f"with T = completion tokens only {strict_s:.2f} s: {out['of_strict_floor']:.0%}; "
          f"peak RSS MB {peaks}; heap kept {out['heap_kept']}; process minor page faults {faults}; "
          f"load {out['load_avg_1min']:.2f}")
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    # on the allocator the `rlvr` command runs on (`rlvr.cli.allocator`); RLVR_ALLOCATOR=system: glibc's
    from rlvr.cli.allocator import reexec_preloaded

    reexec_preloaded([__file__, *sys.argv[1:]])
    main()
