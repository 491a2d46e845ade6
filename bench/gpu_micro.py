"""GPU micro-checks of rlvr's own paths, no TRL: one JSON line per check, as each finishes.

    python bench/gpu_micro.py              # on a GPU: Qwen2.5-0.5B's shape for the speed checks
    python bench/gpu_micro.py --tiny       # anywhere (DRY=1 of bench/gpu_check.sh): tiny shapes, CPU

Checks (a small Llama for the equality checks, the 0.5B shape with random weights for speed):
- `graph_decode`: the CUDA-graph decode equals the eager step over repeated calls, with the
  allocator's freed blocks filled with NaN between calls, and a sampled decode repeats its seed;
- `decode_speed`: new tokens/s of the first call (which captures the graphs) and of replays;
- `logprob_parity`: the engine's recorded log-probs vs the trainer's recomputation, bf16;
- `update_speed`: update tokens/s and peak memory at the default micro-batch budget
  (`grpo.micro_batch_tokens: 0`) and at an explicit one;
- `thread_capture`: graphs captured in a background thread while the main thread allocates.
On a CPU the graphs are off (the eager step) and the speeds mean nothing; the lines prove the
script. A check that raises prints `{"check": ..., "ok": false, "error": ...}` and the rest run.
The last line is a summary: `{"phase": "micro", "ok": ..., "failed": [...]}`.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
import traceback
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "src"), str(HERE)]

PROMPTS = ("12+345=", "7+8=", "905+46=", "3+4=")


def emit(record: dict) -> None:
    print(json.dumps(record), flush=True)


def small(device):
    """A small Llama with weights large enough that greedy paths differ by prompt, and its engine."""
    from rlvr.models.tiny import build_model
    from rlvr.rollout.hf import HFEngine

    model, tok = build_model(seed=3, hidden=128, layers=4, heads=4, mlp=256)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0, 0.3)
    model.to(device.torch).eval()
    return HFEngine(model, tok, device=device, use_chat_template=False)


def decoder(engine, graphs: bool):
    from rlvr.rollout.cuda_decode import GraphDecoder

    dtype = torch.bfloat16 if engine.autocast_bf16 else torch.float32
    return GraphDecoder(engine.model, engine.device, dtype, engine.pad_id, engine.eos_ids,
                        engine.vocab_limit, use_graphs=graphs and engine.device.is_cuda)


def poison(device, blocks: int = 64) -> list[torch.Tensor]:
    return [torch.full((n,), float("nan"), device=device.torch) for n in (256, 2048, 16384, 131072)
            for _ in range(blocks)]


def ids(engine, shift: int) -> list[list[int]]:
    return [engine.tokenizer(p)["input_ids"] for p in PROMPTS[shift:] + PROMPTS[:shift]]


def worst(a, b) -> float:
    return max((abs(x - y) for (_, la, _), (_, lb, _) in zip(a, b) for x, y in zip(la, lb)), default=0.0)


def check_graph_decode(args, device) -> dict:
    from rlvr.models.device import Device
    from rlvr.rollout.base import SamplingParams

    engine = small(Device(device.torch))                       # float32: exact comparisons
    graphs, eager = decoder(engine, True), decoder(engine, False)
    greedy = SamplingParams(max_new_tokens=24, greedy=True)
    same, diff, held = True, 0.0, []
    for call in range(4):
        ours = graphs.decode(ids(engine, call), 2, greedy, 0)
        ref = eager.decode(ids(engine, call), 2, greedy, 0)
        same &= [r[0] for r in ours] == [r[0] for r in ref]
        diff = max(diff, worst(ours, ref))
        held.append(poison(device))
    plans = len(graphs.plans)                                 # 1: later calls replayed the first
    sampled = SamplingParams(temperature=0.8, max_new_tokens=24)
    first = graphs.decode(ids(engine, 0), 4, sampled, 7)
    held.append(poison(device))
    repeats = graphs.decode(ids(engine, 0), 4, sampled, 7) == first
    ok = same and diff < 1e-3 and repeats and plans == 1
    return {"ok": ok, "calls": 4, "tokens_equal": same, "max_logp_diff": diff, "seed_repeats": repeats,
            "plans": plans, "graphs": graphs.use_graphs}


def check_thread_capture(args, device) -> dict:
    from rlvr.rollout.base import SamplingParams

    engine = small(device)
    params = SamplingParams(max_new_tokens=24, greedy=True)
    graphs, out, errors, done = decoder(engine, True), [], [], threading.Event()

    def sample():
        try:
            out.append(graphs.decode(ids(engine, 0), 4, params, 0))
        except BaseException as exc:
            errors.append(repr(exc))
        finally:
            done.set()

    thread = threading.Thread(target=sample)
    thread.start()
    allocations = 0
    while not done.is_set():
        x = torch.randn(512, 512, device=device.torch)
        (x @ x).sum().item()
        allocations += 1
    thread.join()
    if errors:
        return {"ok": False, "error": errors[0]}
    diff = worst(out[0], decoder(engine, False).decode(ids(engine, 0), 4, params, 0))
    return {"ok": diff < 0.05, "max_logp_diff_vs_eager": diff, "main_thread_allocations": allocations}


class Big:
    """The speed checks' model (Qwen2.5-0.5B's shape, random weights; tiny with --tiny), its engine
    and one batch of rollouts, shared by the checks that follow `decode_speed`."""

    def __init__(self, args, device):
        import gpu as bench   # bench/gpu.py: the shape, tokenizer and prompts of the TRL comparison
        from rlvr.rollout.hf import HFEngine

        shape = bench.SHAPES["tiny" if args.tiny else "qwen2.5-0.5b"]
        self.tok = bench.build_tokenizer(shape["words"])
        with torch.device(device.torch):
            self.model = bench.build_model(shape, self.tok, seed=0)
        self.rows = args.prompts * args.group_size
        self.engine = HFEngine(self.model, self.tok, use_chat_template=False, device=device,
                               max_batch=self.rows)
        self.prompts = bench.make_prompts(self.tok, args.prompts, seed=0)
        self.groups: list = []


def check_decode_speed(args, device, big: Big) -> dict:
    from rlvr.rollout.base import SamplingParams
    from rlvr.types import Problem

    problems = [Problem(str(i), p, verifier="none") for i, p in enumerate(big.prompts)]
    params = SamplingParams(temperature=1.0, max_new_tokens=args.max_new_tokens)
    out = {}
    for name in ("first_call", "replay_1", "replay_2"):
        device.synchronize()
        t0 = time.perf_counter()
        big.groups = big.engine.generate(problems, args.group_size, params, seed=len(out))
        device.synchronize()
        new = sum(len(c.token_ids) for g in big.groups for c in g.completions)
        out[name] = {"s": round(time.perf_counter() - t0, 4), "new_tokens": new,
                     "tok_s": round(new / (time.perf_counter() - t0))}
    out["replay_over_first"] = round(out["replay_2"]["tok_s"] / out["first_call"]["tok_s"], 2)
    out["goal_tok_s"] = 40000
    return {"ok": True, **out}


def check_logprob_parity(args, device, big: Big) -> dict:
    from rlvr.models.batch import build_batch
    from rlvr.training.update import Compute, _logp_and_entropy

    ones = torch.ones(len(big.groups), args.group_size)
    batch = build_batch(big.groups, ones, big.engine.pad_id).to(device)
    compute = Compute(device, vocab_limit=big.engine.vocab_limit, micro_batch_tokens=16384)
    with torch.no_grad():
        logp, _ = _logp_and_entropy(big.model, batch, 1.0, device.bf16, compute)
    diff = (logp - batch.sampling_logp)[batch.completion_mask.bool()].abs()
    mean, most = float(diff.mean()), float(diff.max())
    bound = (0.02, 0.25) if device.bf16 else (1e-3, 1e-3)
    return {"ok": mean < bound[0] and most < bound[1], "bf16": device.bf16, "mean_abs_diff": mean,
            "max_abs_diff": most, "bound_mean_max": bound}


def check_update_speed(args, device, big: Big) -> dict:
    from rlvr.algo.advantages import ADVANTAGES
    from rlvr.training import gpu_forward
    from rlvr.models.batch import build_batch
    from rlvr.training.update import Compute, UpdateSpec, update_policy

    rewards = torch.rand(len(big.groups), args.group_size, generator=torch.Generator().manual_seed(0))
    batch = build_batch(big.groups, ADVANTAGES["group"](rewards), big.engine.pad_id)
    opt = torch.optim.AdamW(big.model.parameters(), lr=1e-6, betas=(0.9, 0.99), weight_decay=0.0)
    tokens = float(batch.prompt_mask.sum() + batch.completion_mask.sum())
    out = {}
    default = gpu_forward.micro_batch_tokens(0, big.model, device, False)
    for name, budget in (("default", default), ("explicit", args.micro_batch_tokens)):
        compute = Compute(device, False, budget, big.engine.vocab_limit)
        for _ in range(2):                 # the first includes AdamW's state allocation
            device.synchronize()
            device.reset_peak_memory()
            t0 = time.perf_counter()
            update_policy(big.model, opt, batch, UpdateSpec(), autocast=device.bf16, compute=compute)
            device.synchronize()
            s = time.perf_counter() - t0
        out[name] = {"micro_batch_tokens": budget, "s": round(s, 4), "tok_s": round(tokens / s),
                     "peak_gb": device.peak_memory_gb()}
    return {"ok": True, "tokens": tokens, **out, "goal_tok_s": 80000}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tiny", action="store_true", help="tiny shapes, few tokens (a CPU dry run)")
    p.add_argument("--device", default="auto")
    p.add_argument("--prompts", type=int, default=16)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--max-new-tokens", type=int, default=256)
    p.add_argument("--micro-batch-tokens", type=int, default=16384)
    args = p.parse_args(argv)
    if args.tiny:
        args.prompts, args.group_size, args.max_new_tokens = 2, 2, 8
        args.micro_batch_tokens = 16
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    from rlvr.models.device import Device
    from rlvr.models.quiet import quiet_transformers

    quiet_transformers()
    device = Device.resolve(args.device)
    emit({"check": "device", "device": str(device.torch), "bf16": device.bf16, "tiny": args.tiny})
    failed: list[str] = []
    big: list[Big] = []
    checks = [("graph_decode", check_graph_decode), ("thread_capture", check_thread_capture),
              ("decode_speed", lambda a, d: check_decode_speed(a, d, big[0])),
              ("logprob_parity", lambda a, d: check_logprob_parity(a, d, big[0])),
              ("update_speed", lambda a, d: check_update_speed(a, d, big[0]))]
    for name, fn in checks:
        t0 = time.perf_counter()
        try:
            if name == "decode_speed":
                big.append(Big(args, device))
            record = fn(args, device)
        except Exception as exc:           # one broken check leaves the others' numbers
            record = {"ok": False, "error": f"{type(exc).__name__}: {exc}",
                      "where": traceback.format_exc().splitlines()[-3:]}
        emit({"check": name, **record, "wall_s": round(time.perf_counter() - t0, 2)})
        if not record["ok"]:
            failed.append(name)
    emit({"phase": "micro", "ok": not failed, "failed": failed})
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
