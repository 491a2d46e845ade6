"""The default micro-batch budget against the memory one update really takes, on one GPU.

    python bench/gpu_memory.py [--tiny]                                   # one process
    torchrun --standalone --nproc_per_node=1 bench/gpu_memory.py --ddp [--tiny]   # DDP, world size 1

A Qwen2.5-1.5B-shaped model (its config as a dict, random weights: no download), float32 master
weights, AdamW; `grpo.micro_batch_tokens: 0` gives the budget (`gpu_forward.micro_batch_tokens`,
the forward the model takes: fused, or through the DDP wrapper and the chunked head); one GRPO
update of exactly one micro-batch of that many tokens (rows of 512 prompt + 512 completion
tokens), bf16 autocast. Prints one JSON line: {"check": "memory", "mode", "budget_tokens",
"predicted_gb" (state + kept activations, `gpu_forward.state_bytes` + `token_bytes`),
"peak_gb" (torch.cuda.max_memory_allocated), "total_gb", "update_tok_s", "ok" (peak within the
card)}. `--tiny`: the built-in tiny Llama on the CPU with a 1 GiB pretend card (the script's own
dry run; no memory figure).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

QWEN_15B = dict(model_type="qwen2", hidden_size=1536, intermediate_size=8960, num_attention_heads=12,
                num_key_value_heads=2, num_hidden_layers=28, vocab_size=151936,
                max_position_embeddings=32768, tie_word_embeddings=True, rope_theta=1e6)
GB = 1e9


def build(tiny: bool, device):
    from transformers import AutoConfig, AutoModelForCausalLM

    if tiny:
        from rlvr.models.tiny import build_model
        return build_model(seed=0, hidden=32, layers=2, heads=4, mlp=64)[0].to(device)
    cfg = AutoConfig.for_model(**QWEN_15B)
    torch.manual_seed(0)
    with torch.device(device):
        return AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)


def batch_of(tokens: int, vocab: int, width: int):
    from rlvr.models.batch import Batch

    rows, half = max(1, tokens // width), width // 2
    g = torch.Generator().manual_seed(0)
    ids = lambda: torch.randint(3, vocab, (rows, half), generator=g)  # noqa: E731
    ones = torch.ones(rows, half, dtype=torch.long)
    return Batch(ids(), ones, ids(), ones.clone(), torch.linspace(-1, 1, rows), torch.full((rows, half), -2.0))


def main(argv=None) -> int:
    from rlvr.models.device import Device
    from rlvr.training import gpu_forward
    from rlvr.training.update import Compute, UpdateSpec, update_policy

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tiny", action="store_true")
    p.add_argument("--ddp", action="store_true")
    args = p.parse_args(argv)
    dp = None
    if args.ddp:
        from rlvr.training.distributed import DataParallel
        dp = DataParallel("ddp")
    on_gpu = torch.cuda.is_available() and not args.tiny
    device = Device.resolve("cuda" if on_gpu else "cpu", local_rank=dp.local_rank if dp else None)
    model = build(args.tiny, device.torch)
    train = dp.wrap(model) if dp else model
    total = torch.cuda.get_device_properties(device.torch).total_memory if on_gpu else 2**30
    budget = gpu_forward.micro_batch_tokens(0, train, Device(torch.device("cuda", 0)), False,
                                            total_bytes=total)
    cfg = model.config
    kind = gpu_forward.variant(train, wrapped=dp is not None)
    counts = gpu_forward._param_counts(model)
    state = gpu_forward.state_bytes(counts[0], "ddp" if dp else "", 1, *counts[1:])
    kept = budget * gpu_forward.token_bytes(cfg.hidden_size, cfg.intermediate_size,
                                            cfg.num_hidden_layers, kind=kind)
    batch = batch_of(budget, cfg.vocab_size, 32 if args.tiny else 1024)
    opt = torch.optim.AdamW(train.parameters(), lr=1e-7)
    if on_gpu:
        torch.cuda.reset_peak_memory_stats(device.torch)
    t0 = time.perf_counter()
    stats = update_policy(train, opt, batch, UpdateSpec(skip_zero_advantage=False), autocast=True,
                          compute=Compute(device, micro_batch_tokens=budget), dp=dp)
    if on_gpu:
        torch.cuda.synchronize(device.torch)
    seconds = time.perf_counter() - t0
    peak = torch.cuda.max_memory_allocated(device.torch) if on_gpu else 0
    ok = bool(torch.isfinite(torch.tensor(stats["loss"]))) and peak <= total
    print(json.dumps({"check": "memory", "mode": "ddp" if dp else "one", "variant": kind, "ok": ok,
                      "device": str(device.torch), "budget_tokens": budget,
                      "batch_tokens": int(batch.prompt_ids.numel() + batch.completion_ids.numel()),
                      "predicted_gb": round((state + kept) / GB, 2), "peak_gb": round(peak / GB, 2),
                      "total_gb": round(total / GB, 2), "update_tok_s": round(budget / seconds, 1)}),
          flush=True)
    if dp is not None:
        dp.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
