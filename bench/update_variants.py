"""Two ways to make rlvr's CPU update faster, each timed against the plain fused update in the
same run (issue 18: what stands between 1.7x and 3x TRL on a 2-core AVX2 CPU).

    python bench/update_variants.py runs/bench_grpo_vs_trl/cold_start_seed0_acc0.2/sft

One batch as `grpo_vs_trl.py` trains it: 16 arithmetic prompts x G=8 sampled from MODEL (48 new
tokens, T=1), the first 92 rows (what rlvr keeps of 128 when zero-advantage rows are skipped),
padding columns trimmed. Timed, forward + backward of the summed token log-probs, one torch
thread, interleaved repeats (medians and ranges):
- `chunks k`: the rows split into k micro-batches (cache locality), each trimmed of its padding;
- `compiled`: `torch.compile` (inductor, static shapes) of `fused_llama.completion_logits`; its
  compile time is printed separately (each step's shape differs, so a run pays it per shape).
Prints one line per variant with its ratio to the plain update, and a JSON line last.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time

import torch

from rlvr.models import fused_llama
from rlvr.models.policy import load_policy
from rlvr.rollout.base import SamplingParams
from rlvr.rollout.hf import HFEngine
from rlvr.tasks.arithmetic import ArithmeticTask
from rlvr.models.batch import build_batch


def batch(model, tokenizer, rows: int):
    engine = HFEngine(model, tokenizer)
    problems = ArithmeticTask().sample(random.Random(0), 16)
    groups = engine.generate(problems, 8, SamplingParams(temperature=1.0, max_new_tokens=48), seed=0)
    return build_batch(groups, torch.randn(16, 8), engine.pad_id).rows(torch.arange(rows)).trimmed()


def forward_backward(model, work, chunks: int, fn) -> float:
    parts = [work] if chunks == 1 else [work.rows(c).trimmed()
                                        for c in torch.tensor_split(torch.arange(len(work)), chunks)]
    model.zero_grad(set_to_none=True)
    start = time.perf_counter()
    for p in parts:
        logits = fn(model, p.prompt_ids, p.prompt_mask, p.completion_ids, p.completion_mask, torch.float32)
        logp = torch.log_softmax(logits.float(), -1).gather(-1, p.completion_ids[..., None]).squeeze(-1)
        (logp * p.completion_mask).sum().backward()
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="checkpoint (the bench's cold start gives the bench's shapes)")
    ap.add_argument("--rows", type=int, default=92)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--chunks", type=int, nargs="+", default=[2, 3, 4])
    ap.add_argument("--no-compile", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    model, tokenizer = load_policy(args.model)
    work = batch(model, tokenizer, args.rows)
    print(f"batch: {len(work)} rows, prompt {work.prompt_ids.shape[1]} + completion "
          f"{work.completion_ids.shape[1]} columns", flush=True)
    plain = fused_llama.completion_logits
    variants = {"plain": (1, plain), **{f"chunks {k}": (k, plain) for k in args.chunks}}
    compile_s = None
    if not args.no_compile:
        compiled = torch.compile(plain, dynamic=False)
        compile_s = forward_backward(model, work, 1, compiled)   # the first call compiles
        variants["compiled"] = (1, compiled)
        print(f"compile + first call: {compile_s:.1f} s", flush=True)
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(args.repeats):
        for name, (k, fn) in variants.items():
            times[name].append(forward_backward(model, work, k, fn))
    base = statistics.median(times["plain"])
    out = {"rows": len(work), "compile_s": compile_s, "variants": {}}
    for name, values in times.items():
        median = statistics.median(values)
        out["variants"][name] = {"median_s": median, "range_s": [min(values), max(values)],
                                 "speedup": base / median}
        print(f"{name:10s} {median:.3f} s [{min(values):.3f}, {max(values):.3f}]  "
              f"x{base / median:.2f} vs plain")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
