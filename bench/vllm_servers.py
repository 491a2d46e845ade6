"""Rollout throughput: the in-process HF engine against 1 and 2 vLLM server processes, one run.

    .venv-vllm/bin/python bench/vllm_servers.py [--model builtin:tiny-llama] [--prompts 32] [--n 8]

Same model, problems, sampling parameters and seed for every engine; each engine gets a warm-up
call, then `--repeats` timed calls, interleaved round-robin across the engines so that load from
other processes hits them alike. Prints completion tokens per second (median over the calls) and
the ratio to the HF engine measured in this run, with the load average before and after. On a
machine with fewer cores than servers + 1 the servers share the cores: the point there is
correctness (the same tokens come back, test_vllm_servers.py), not speed.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="builtin:tiny-llama")
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=40)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    import torch

    from rlvr.models.policy import load_policy
    from rlvr.rollout.base import SamplingParams
    from rlvr.rollout.hf import HFEngine
    from rlvr.rollout.vllm.servers import VLLMServerEngine
    from rlvr.tasks.arithmetic import ArithmeticTask

    torch.set_num_threads(1)
    load_before = os.getloadavg()[0]
    policy, tok = load_policy(args.model, seed=0)
    problems = ArithmeticTask(3).sample(random.Random(0), args.prompts, "train")
    params = SamplingParams(max_new_tokens=args.max_new_tokens)
    options = {"kv_cache_memory_bytes": 512 * 2**20}
    engines = {"hf (in-process)": HFEngine(policy, tok),
               "1 vLLM server": VLLMServerEngine(policy, tok, servers=1, options=options),
               "2 vLLM servers": VLLMServerEngine(policy, tok, servers=2, options=options)}
    rates: dict[str, list[float]] = {name: [] for name in engines}
    try:
        for name, engine in engines.items():
            engine.generate(problems, args.n, params, seed=0)   # warm-up
        for r in range(args.repeats):
            for name, engine in engines.items():
                t0 = time.perf_counter()
                groups = engine.generate(problems, args.n, params, seed=r + 1)
                dt = time.perf_counter() - t0
                rates[name].append(sum(len(c.token_ids) for g in groups for c in g.completions) / dt)
    finally:
        for engine in engines.values():
            engine.close()
    base = statistics.median(rates["hf (in-process)"])
    print(f"{args.prompts} prompts x {args.n} samples, <= {args.max_new_tokens} new tokens, {args.model}; "
          f"cores available {len(os.sched_getaffinity(0))}; load {load_before:.2f} -> {os.getloadavg()[0]:.2f}")
    print("| engine | completion tokens/s (median) | vs HF |")
    print("| --- | --- | --- |")
    for name, values in rates.items():
        med = statistics.median(values)
        print(f"| {name} | {med:,.0f} | {med / base:.2f}x |")


if __name__ == "__main__":
    main()
