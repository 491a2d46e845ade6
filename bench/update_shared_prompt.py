"""The update's forward + backward with each group's prompt run once vs every row whole, interleaved.

The smollm2 preset's shapes: 8 prompts x G = 8 word problems in SmolLM2's chat template (about 55-70
prompt tokens), completions sampled by rlvr's engine, the rows of `--groups` groups trained (a GRPO
step trains only groups with signal), micro-batches of `--micro-batch-tokens` padded tokens, bf16
matrices where the CPU computes bf16 natively. Prints the median seconds of each arm over
`--repeats` interleaved rounds, the ratio, and each arm's rate against 6 x parameters x the
tokens it processed (the arithmetic a dense forward + backward needs), with the CPU named.

    RLVR_CACHE=... python bench/update_shared_prompt.py --repeats 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from stages import cpu_name  # noqa: E402


def _batch(model, tok, groups: int, max_new: int, bf16: bool):
    from rlvr.config import PRESETS, load
    from rlvr.models.device import Device
    from rlvr.rollout.base import SamplingParams
    from rlvr.rollout.hf import HFEngine
    from rlvr.tasks.base import build_task
    from rlvr.models.batch import build_batch

    task = build_task(load(PRESETS / "smollm2.yaml", []))
    sampled = HFEngine(model, tok, device=Device.cpu(bf16)).generate(
        task.heldout(groups), 8, SamplingParams(max_new_tokens=max_new, temperature=0.7), seed=0)
    return build_batch(sampled, torch.ones(groups, 8), tok.pad_token_id)


def _step(model, batch, share: bool, dtype, micro_tokens: int) -> float:
    from rlvr.models import fused_llama
    from rlvr.training.plan import split_rows

    width = batch.prompt_ids.shape[1] + batch.completion_ids.shape[1]
    t0 = time.perf_counter()
    for rows in split_rows(len(batch), width, micro_tokens):
        rows = torch.arange(len(batch)) if rows is None else rows
        logits = fused_llama.completion_logits(model, batch.prompt_ids[rows], batch.prompt_mask[rows],
                                               batch.completion_ids[rows], batch.completion_mask[rows],
                                               dtype, share_prompts=share)
        logp = torch.log_softmax(logits, -1).gather(-1, batch.completion_ids[rows][..., None])[..., 0]
        (-(logp * batch.completion_mask[rows]).sum()).backward()
    model.zero_grad(set_to_none=True)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--groups", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=60)
    ap.add_argument("--micro-batch-tokens", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    from rlvr.models.device import cpu_computes_bf16
    from rlvr.models.policy import load_policy
    from rlvr.models.resolve import resolve_model_path

    torch.set_num_threads(1)
    bf16 = cpu_computes_bf16()
    model, tok = load_policy(resolve_model_path("builtin:smollm2-135m-instruct"), "float32", 0)
    batch = _batch(model, tok, args.groups, args.max_new_tokens, bf16)
    dtype = torch.bfloat16 if bf16 else torch.float32
    n_params = sum(p.numel() for p in model.parameters())
    prompt_tokens = int(batch.prompt_mask.sum())
    completion_tokens = int(batch.completion_mask.sum())
    shared_tokens = prompt_tokens // 8 + completion_tokens
    times: dict[bool, list[float]] = {True: [], False: []}
    _step(model, batch, True, dtype, args.micro_batch_tokens)      # warm-up
    for _ in range(args.repeats):
        for share in (False, True):
            times[share].append(_step(model, batch, share, dtype, args.micro_batch_tokens))
    print(f"CPU: {cpu_name()}; bf16 native: {bf16}; torch threads 1; load {os.getloadavg()[0]:.2f}; "
          f"{len(batch)} rows, prompt tokens "
          f"{prompt_tokens}, completion tokens {completion_tokens}, "
          f"micro-batches of {args.micro_batch_tokens}")
    for share, tokens in ((False, prompt_tokens + completion_tokens), (True, shared_tokens)):
        med = statistics.median(times[share])
        rate = 6 * n_params * tokens / med / 1e9
        print(f"{'shared prompts' if share else 'whole rows    '}: median {med:.2f} s "
              f"[{min(times[share]):.2f}, {max(times[share]):.2f}], {tokens} tokens processed, "
              f"6*N*tokens at {rate:.0f} GFLOP/s")
    print(f"ratio whole / shared: {statistics.median(times[False]) / statistics.median(times[True]):.2f}x")


if __name__ == "__main__":
    main()
