"""rlvr vs TRL `GRPOTrainer` on one GPU: Qwen2.5-0.5B's shape, random weights, bf16, one run.

    python bench/gpu.py                # on a GPU machine (see bench/gpu_check.sh for the one command)
    python bench/gpu.py --tiny         # anywhere: a small shape and a few tokens, to prove the script

Model: a randomly initialised Qwen2 with Qwen2.5-0.5B's shape (hidden 896, 24 layers, 14 heads,
2 KV heads, MLP 4864, vocabulary 151,936, tied embeddings). Tokenizer: a local word-level one with
151,665 entries (as Qwen2.5's tokenizer is shorter than its padded head), half of the words letters,
half numbers, so that the reward — the share of digit characters in the completion — varies from
completion to completion and every group has a non-zero advantage (no skipped work for rlvr).
Batch: 16 prompts × G = 8, 256 new tokens, temperature 1, lr 1e-6 constant, AdamW (0.9, 0.99),
clip 1.0, ε = 0.2, no KL, token-mean loss (TRL's `dapo`), one update per batch, bf16 on a GPU
(TRL `bf16=True`; rlvr bf16 matrices, fp32 master weights). TRL generates with HF `generate` (no
vLLM). Interleaved: TRL step k, then rlvr step k on the same prompts, so both see the same machine.

Prints per-phase times, decode tokens/s, update tokens/s, peak memory, and last a JSON line with
`ratio` = rlvr completion tokens/s ÷ TRL completion tokens/s (medians after `--warmup` steps).
If TRL is missing or fails (its import, its trainer, `datasets`), rlvr runs the remaining steps
alone and the JSON line still holds rlvr's numbers, with `ratio` null and `trl_error` set.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

SHAPES = {
    "qwen2.5-0.5b": dict(hidden_size=896, num_hidden_layers=24, num_attention_heads=14,
                         num_key_value_heads=2, intermediate_size=4864, vocab_size=151936, words=151665),
    "tiny": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                 intermediate_size=128, vocab_size=1024, words=1000),
}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tiny", action="store_true", help="small shape, few tokens (runs on a CPU)")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--warmup", type=int, default=1, help="steps left out of the medians")
    p.add_argument("--prompts", type=int, default=16)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--max-new-tokens", type=int, default=256)
    p.add_argument("--micro-batch-tokens", type=int, default=16384)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="auto")
    p.add_argument("--workdir", default="runs/bench_gpu")
    args = p.parse_args(argv)
    if args.tiny:
        args.prompts, args.group_size, args.max_new_tokens = min(args.prompts, 4), min(args.group_size, 4), 16
        args.steps = min(args.steps, 3)
    return args


def build_tokenizer(words: int):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<eos>": 1}
    i = 2
    while len(vocab) < words:       # alternately a letter word and a number: the reward has variance
        vocab.setdefault(_letters(i) if i % 2 == 0 else str(i), len(vocab))
        i += 1
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<pad>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>", pad_token="<pad>",
                                   padding_side="left")


def _letters(i: int) -> str:
    out = ""
    while i:
        i, r = divmod(i, 26)
        out += chr(97 + r)
    return out


def build_model(shape: dict, tokenizer, seed: int):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    cfg = Qwen2Config(**{k: v for k, v in shape.items() if k != "words"}, tie_word_embeddings=True,
                      max_position_embeddings=4096, rope_theta=1e6, eos_token_id=tokenizer.eos_token_id,
                      pad_token_id=tokenizer.pad_token_id, bos_token_id=None)
    model = Qwen2ForCausalLM(cfg)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def digit_share(text: str) -> float:
    chars = [c for c in text if not c.isspace()]
    return sum(c.isdigit() for c in chars) / len(chars) if chars else 0.0


def make_prompts(tokenizer, n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    words = [w for w in tokenizer.get_vocab() if not w.startswith("<")]
    return [" ".join(rng.choice(words) for _ in range(9)) for _ in range(n)]


class Rlvr:
    """rlvr's stages driven directly: HFEngine.generate → reward → advantages → update_policy."""

    def __init__(self, model, tokenizer, device, args):
        from rlvr.algo.advantages import ADVANTAGES
        from rlvr.algo.kl import KL_ESTIMATORS
        from rlvr.algo.losses import AGGREGATIONS
        from rlvr.rollout.base import SamplingParams
        from rlvr.rollout.hf import HFEngine
        from rlvr.algo.losses import LossSpec
        from rlvr.training.update import Compute, UpdateSpec

        self.device, self.args, self.tok = device, args, tokenizer
        self.model = model.to(device.torch)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-6, betas=(0.9, 0.99), weight_decay=0.0)
        self.engine = HFEngine(self.model, tokenizer, use_chat_template=False, device=device,
                               max_batch=args.prompts * args.group_size)
        self.params = SamplingParams(temperature=1.0, max_new_tokens=args.max_new_tokens)
        self.adv = ADVANTAGES["group"]
        self.spec = UpdateSpec(LossSpec(kl_fn=KL_ESTIMATORS["k3"], agg_fn=AGGREGATIONS["token-mean"],
                                        eps_low=0.2, eps_high=0.2, dual_clip=0.0, beta=0.0,
                                        entropy_coef=0.0), temperature=1.0, grad_clip=1.0)
        self.compute = Compute(device, False, args.micro_batch_tokens, self.engine.vocab_limit)

    def step(self, prompts: list[str], step: int) -> dict:
        from rlvr.models.batch import build_batch
        from rlvr.training.update import update_policy
        from rlvr.types import Problem

        problems = [Problem(f"{step}/{i}", p, verifier="none") for i, p in enumerate(prompts)]
        dev, out = self.device, {}
        dev.synchronize()
        dev.reset_peak_memory()
        t0 = time.perf_counter()
        groups = self.engine.generate(problems, self.args.group_size, self.params, seed=1000 + step)
        t1 = time.perf_counter()
        rewards = torch.tensor([[digit_share(c.text) for c in g.completions] for g in groups])
        t2 = time.perf_counter()
        batch = build_batch(groups, self.adv(rewards), self.engine.pad_id)
        stats = update_policy(self.model, self.opt, batch, self.spec,
                              autocast=dev.bf16, compute=self.compute)
        dev.synchronize()
        t3 = time.perf_counter()
        completion = float(batch.completion_mask.sum())
        trained = completion + float(batch.prompt_mask.sum())
        out.update(step_s=t3 - t0, generate_s=t1 - t0, reward_s=t2 - t1, update_s=t3 - t2,
                   completion_tokens=completion, decode_tok_s=completion / (t1 - t0),
                   update_tok_s=trained * stats.get("active_fraction", 1.0) / (t3 - t2),
                   reward=float(rewards.mean()), peak_gb=dev.peak_memory_gb(), loss=stats.get("loss"))
        return out


def trl_trainer(model, tokenizer, prompts: list[str], args, device, times: list, after_step):
    from datasets import Dataset
    from transformers import TrainerCallback
    from transformers.trainer_callback import PrinterCallback
    from trl import GRPOConfig, GRPOTrainer

    def reward(completions, **_):
        return [digit_share(c) for c in completions]

    class Interleave(TrainerCallback):
        def on_step_begin(self, *_, **__):
            device.synchronize()
            device.reset_peak_memory()
            self.t0 = time.perf_counter()

        def on_step_end(self, *_, **__):
            device.synchronize()
            times.append((time.perf_counter() - self.t0, device.peak_memory_gb()))
            after_step(len(times) - 1)

    gcfg = GRPOConfig(
        output_dir=str(Path(args.workdir) / "trl"), per_device_train_batch_size=args.prompts * args.group_size,
        gradient_accumulation_steps=1, num_generations=args.group_size,
        max_completion_length=args.max_new_tokens, temperature=1.0, top_p=1.0, top_k=0,
        learning_rate=1e-6, lr_scheduler_type="constant", warmup_steps=0, adam_beta1=0.9,
        adam_beta2=0.99, weight_decay=0.0, max_grad_norm=1.0, beta=0.0, epsilon=0.2,
        loss_type="dapo", scale_rewards="group", num_iterations=1, max_steps=args.steps,
        shuffle_dataset=False, logging_steps=1, save_strategy="no", report_to="none",
        use_cpu=not device.is_cuda, bf16=device.bf16, seed=args.seed, disable_tqdm=True,
        dataloader_num_workers=0)
    data = Dataset.from_list([{"prompt": p} for p in prompts])
    trainer = GRPOTrainer(model=model, reward_funcs=reward, args=gcfg, train_dataset=data,
                          processing_class=tokenizer, callbacks=[Interleave()])
    trainer.remove_callback(PrinterCallback)
    return trainer


def _median(rows: list[dict], key: str, warmup: int) -> float:
    vals = [r[key] for r in rows[warmup:] if r.get(key) is not None] or [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(vals) if vals else float("nan")


def main(argv=None) -> int:
    args = parse_args(argv)
    from rlvr.models.device import Device
    from rlvr.models.quiet import quiet_transformers

    quiet_transformers()
    device = Device.resolve(args.device)
    shape = SHAPES["tiny" if args.tiny else "qwen2.5-0.5b"]
    tokenizer = build_tokenizer(shape["words"])
    base = build_model(shape, tokenizer, args.seed)
    n_params = sum(p.numel() for p in base.parameters())
    prompts = make_prompts(tokenizer, args.prompts * args.steps, args.seed)
    print(f"device {device.torch} bf16={device.bf16}; model {n_params / 1e6:.0f}M parameters, head "
          f"{shape['vocab_size']} ids, tokenizer {len(tokenizer)}; {args.prompts} prompts x G={args.group_size}, "
          f"{args.max_new_tokens} new tokens, {args.steps} steps (TRL step k, then rlvr step k)", flush=True)
    rlvr = Rlvr(copy.deepcopy(base), tokenizer, device, args)
    rlvr_rows: list[dict] = []
    trl_times: list[tuple[float, float | None]] = []

    def rlvr_step(k: int) -> None:
        row = rlvr.step(prompts[k * args.prompts:(k + 1) * args.prompts], k)
        rlvr_rows.append(row)
        trl = f"TRL {trl_times[k][0]:.2f} s | " if k < len(trl_times) else ""
        print(f"step {k}: {trl}rlvr {row['step_s']:.2f} s (generate "
              f"{row['generate_s']:.2f}, reward {row['reward_s']:.3f}, update {row['update_s']:.2f}) "
              f"decode {row['decode_tok_s']:,.0f} tok/s, update {row['update_tok_s']:,.0f} tok/s, "
              f"reward {row['reward']:.3f}", flush=True)

    trainer, trl_error = None, None
    try:                          # TRL step k, then (in its callback) rlvr step k
        trainer = trl_trainer(base.to(device.torch), tokenizer, prompts, args, device, trl_times, rlvr_step)
        trainer.train()
    except Exception as exc:      # rlvr's numbers do not depend on TRL or `datasets` working
        trl_error = f"{type(exc).__name__}: {exc}"[:500]
        print(f"TRL failed ({trl_error}); rlvr runs the remaining steps alone", flush=True)
    for k in range(len(rlvr_rows), args.steps):
        rlvr_step(k)
    return report(args, trainer if trl_error is None else None, trl_times, rlvr_rows, device, trl_error)


def report(args, trainer, trl_times, rlvr_rows, device, trl_error: str | None = None) -> int:
    batch = args.prompts * args.group_size
    logs = [r for r in trainer.state.log_history if "completions/mean_length" in r] if trainer else []
    trl_tokens = [r["completions/mean_length"] * batch for r in logs]
    trl_rows = [{"step_s": s, "peak_gb": m, "tok_s": t / s, "reward": r.get("reward")}
                for (s, m), t, r in zip(trl_times, trl_tokens, logs)]
    for r in rlvr_rows:
        r["tok_s"] = r["completion_tokens"] / r["step_s"]
    w = args.warmup
    summary = {"rlvr": {k: _median(rlvr_rows, k, w) for k in
                        ("step_s", "generate_s", "reward_s", "update_s", "decode_tok_s", "update_tok_s",
                         "tok_s", "peak_gb", "reward")},
               "trl": {k: _median(trl_rows, k, w) for k in ("step_s", "tok_s", "peak_gb", "reward")}}
    summary["trl"]["first_step_s"] = trl_rows[0]["step_s"] if trl_rows else None
    summary["rlvr"]["first_step_s"] = rlvr_rows[0]["step_s"] if rlvr_rows else None
    for name, s in summary.items():
        print(f"{name}: " + ", ".join(f"{k} {v:,.3f}" for k, v in s.items() if isinstance(v, float)))
    if not device.is_cuda:
        import resource
        print(f"peak memory (CPU, max RSS of the process, both trainers): "
              f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6:.2f} GB")
    ratio = summary["rlvr"]["tok_s"] / summary["trl"]["tok_s"] if trl_rows else float("nan")
    print(json.dumps({"phase": "trl", "ratio": _finite(ratio),
                      "trl_error": trl_error, "device": str(device.torch), "tiny": args.tiny,
                      "steps": args.steps, "warmup": args.warmup, "batch": batch,
                      "max_new_tokens": args.max_new_tokens,
                      "rlvr_decode_tok_s": round(summary["rlvr"]["decode_tok_s"]),
                      "rlvr_update_tok_s": round(summary["rlvr"]["update_tok_s"]),
                      "rlvr_s_per_step": round(summary["rlvr"]["step_s"], 3),
                      "trl_s_per_step": _finite(summary["trl"]["step_s"]),
                      "rlvr_peak_gb": summary["rlvr"]["peak_gb"] if device.is_cuda else None,
                      "trl_peak_gb": summary["trl"]["peak_gb"] if device.is_cuda else None}))
    return 1 if trl_error else 0      # rlvr's numbers are above either way


def _finite(x: float, digits: int = 3) -> float | None:
    return round(x, digits) if x == x else None    # NaN (no TRL steps): null in the JSON line


if __name__ == "__main__":
    sys.exit(main())
