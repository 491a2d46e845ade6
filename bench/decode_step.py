"""The decode-only layer step vs the general forward at one token, in one process, taking turns.

Run (from the repository root; any local Llama-family checkpoint directory):

    python bench/decode_step.py --model PATH [--rows-per-prompt 8] [--precision bf16] [--repeats 4]

What it does: rlvr's `HFEngine` samples `--rows-per-prompt` completions of each of 4 arithmetic
prompts (temperature 1, 64 new tokens) twice per repeat: once with every decode step through
`decode_step.Decoder.forward` at T = 1 (the general forward the prefill and the update use, which
is how the engine stepped before `Decoder.step`), once through `Decoder.step`
(`models/decode_step.py`). Same model, same engine, same prompts, alternating, so load from
other processes hits both alike. Prints tokens/s of each (median, range) and the per-repeat ratio.
Everything else in the engine (prefill, sampling, bookkeeping) is the same code in both.
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


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True, help="a local checkpoint directory")
    p.add_argument("--rows-per-prompt", type=int, default=8)
    p.add_argument("--precision", choices=["bf16", "fp32"], default="bf16")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--repeats", type=int, default=4)
    p.add_argument("--threads", type=int, default=1)
    return p.parse_args(argv)


def general_forward_step(self, tokens, t):
    """`_FusedCursor.step` through `Decoder.forward` (T = 1) instead of `Decoder.step`."""
    from rlvr.models import backends, decode_step

    pos, end = self.next_pos, self.tp + t + 1
    self.keymask[:, self.tp + t] = True
    sin = decode_step.fold_sin(self.sin)   # folding twice gives the plain table back
    logits = self.dec.forward(tokens[:, None], self.cos[pos][:, None, None], sin[pos][:, None, None],
                              self.tp + t, self.keymask[:, None, None, :end])
    self.next_pos = pos + 1
    return backends._mask_vocab(logits, self.vocab_limit)


def main(argv=None) -> dict:
    args = parse_args(argv)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rlvr.models import backends
    from rlvr.models.device import Device
    from rlvr.rollout.base import SamplingParams
    from rlvr.rollout.hf import HFEngine
    from rlvr.tasks.arithmetic import make_problem

    torch.set_num_threads(args.threads)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32).eval()
    bf16 = args.precision == "bf16"
    engine = HFEngine(model, AutoTokenizer.from_pretrained(args.model), autocast_bf16=bf16,
                      device=Device.cpu(bf16))
    problems = [make_problem(100 + 37 * i, 250 + 91 * i, "+") for i in range(4)]
    params = SamplingParams(temperature=1.0, max_new_tokens=args.max_new_tokens)
    steps = {"general_forward": general_forward_step, "decode_step": backends._FusedCursor.step}
    load_before = os.getloadavg()
    engine.generate(problems[:1], args.rows_per_prompt, params, 0)   # warm-up: fusing, packing
    rates: dict[str, list[float]] = {k: [] for k in steps}
    try:
        for rep in range(args.repeats):
            for name, step in steps.items():
                backends._FusedCursor.step = step
                t0 = time.perf_counter()
                groups = engine.generate(problems, args.rows_per_prompt, params, rep)
                tokens = sum(len(c.token_ids) for g in groups for c in g.completions)
                rates[name].append(tokens / (time.perf_counter() - t0))
    finally:
        backends._FusedCursor.step = steps["decode_step"]
    ratios = [b / a for a, b in zip(rates["general_forward"], rates["decode_step"])]
    for name, v in rates.items():
        print(f"{name:>16}: {statistics.median(v):7.1f} tok/s  [{min(v):.1f}, {max(v):.1f}]")
    print(f"decode_step / general_forward: {statistics.median(ratios):.2f}x  "
          f"[{min(ratios):.2f}, {max(ratios):.2f}]"
          f"  ({args.precision}, {4 * args.rows_per_prompt} rows, {args.threads} thread(s); load average "
          f"{load_before[0]:.2f} -> {os.getloadavg()[0]:.2f})")
    result = {"rows": 4 * args.rows_per_prompt, "precision": args.precision, "rates": rates, "ratios": ratios,
              "load_before": load_before, "load_after": os.getloadavg()}
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
