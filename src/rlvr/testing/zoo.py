"""Tiny random-init checkpoints of the decoder families RL users train, built locally (no hub).

Each entry is a real `transformers` config class with small sizes and the character tokenizer of
`tiny.py` (vocabulary sizes match), saved with `save_pretrained` so it loads through
`AutoModelForCausalLM` like any downloaded checkpoint. Families with a sliding window get a window
(8 tokens) shorter than the sequences the tests use, so the window really masks keys, and every
weight gets noise on top of the init (biases start non-zero, norm weights away from 1).
Used by the architecture tests and `bench/architectures.py`; nothing here is pre-trained.
"""

from __future__ import annotations

from pathlib import Path

_SMALL = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
              intermediate_size=128, max_position_embeddings=256)
_WINDOW = 8

# model_type -> (config class in transformers, extra config keys)
ARCHITECTURES: dict[str, tuple[str, dict]] = {
    "llama": ("LlamaConfig", {}),
    "qwen2": ("Qwen2Config", {}),                     # q/k/v projections carry biases
    "qwen3": ("Qwen3Config", {"head_dim": 16}),       # RMSNorm on q and k per head
    "mistral": ("MistralConfig", {"sliding_window": _WINDOW}),
    "gemma": ("GemmaConfig", {"head_dim": 16}),
    "gemma2": ("Gemma2Config", {"head_dim": 16, "sliding_window": _WINDOW}),
    "gemma3_text": ("Gemma3TextConfig", {"head_dim": 16, "sliding_window": _WINDOW}),
    "phi3": ("Phi3Config", {}),
    "olmo2": ("Olmo2Config", {}),
    "gpt2": ("GPT2Config", {"n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 256}),
    "gpt_neox": ("GPTNeoXConfig", {"rotary_pct": 0.5}),
}


def build(model_type: str, seed: int = 0):
    """(model, tokenizer) for `model_type`, randomly initialised from `seed`, float32."""
    import torch
    import transformers

    from rlvr.models.tiny import build_tokenizer

    tokenizer = build_tokenizer()
    cls_name, extra = ARCHITECTURES[model_type]
    config_cls = getattr(transformers, cls_name)
    ids = dict(vocab_size=len(tokenizer), bos_token_id=tokenizer.bos_token_id,
               eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    sizes = {} if model_type == "gpt2" else _SMALL
    config = config_cls(**ids, **sizes, **extra)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        with torch.no_grad():   # init leaves biases at 0 and norms at 1: a parity test would not see them
            for p in model.parameters():
                p.add_(torch.randn_like(p) * 0.05)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model, tokenizer


def gqa_llama(seed: int = 0, hidden: int = 32):
    """A tiny Llama whose 4 query heads share 2 key/value heads (the SmolLM2 layout, 9 and 3),
    vocabulary 64, in eval mode: for tests that compare two forwards of the same weights.
    `hidden` sets the width (MLP twice it), e.g. to reach a real model's matrix sizes."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=64, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    return LlamaForCausalLM(cfg).eval()


def save(model_type: str, path: str | Path, seed: int = 0) -> Path:
    """Build and save a tiny `model_type` checkpoint (weights + tokenizer) at `path`."""
    from rlvr.models.quiet import quiet_transformers

    quiet_transformers()
    path = Path(path)
    model, tokenizer = build(model_type, seed)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


PROMPTS = ("12+345=", "7+8=", "905+46=")   # different lengths: left padding in every batch


def logprob_parity(model, tokenizer, max_new_tokens: int = 24, seed: int = 0) -> dict:
    """Max |Δ log-prob| of sampled tokens: the engine's sampling log-probs and the update's
    recomputation (padded batch) each against a plain forward of one unpadded sequence."""
    import torch

    from rlvr.rollout.base import SamplingParams
    from rlvr.rollout.hf import HFEngine
    from rlvr.models.batch import build_batch
    from rlvr.training.update import _logp_and_entropy
    from rlvr.types import Problem

    engine = HFEngine(model, tokenizer)
    problems = [Problem(str(i), p) for i, p in enumerate(PROMPTS)]
    groups = engine.generate(problems, 4, SamplingParams(max_new_tokens=max_new_tokens), seed)
    model.eval()
    sampling, plain_all, lengths = 0.0, [], []
    with torch.no_grad():
        for g in groups:
            for c in g.completions:
                ids = torch.tensor([g.prompt_ids + c.token_ids])
                logp = torch.log_softmax(model(input_ids=ids).logits[0].float(), -1)
                tokens = torch.tensor(c.token_ids)
                plain = logp[len(g.prompt_ids) - 1:-1].gather(-1, tokens[:, None]).squeeze(-1)
                sampling = max(sampling, float((plain - torch.tensor(c.logprobs)).abs().max()))
                plain_all.append(plain)
                lengths.append(len(c.token_ids))
        batch = build_batch(groups, torch.ones(len(groups), 4), tokenizer.pad_token_id)
        recomputed, _ = _logp_and_entropy(model, batch, 1.0, False)
    training = max(float((recomputed[i, :n] - p).abs().max()) for i, (p, n) in
                   enumerate(zip(plain_all, lengths)))
    return {"engine": engine._decode.__name__.removeprefix("_decode_"), "sampling_max_abs": sampling,
            "training_max_abs": training, "tokens": sum(lengths), "max_len": max(lengths)}


def grpo_run(checkpoint: str | Path, run_dir: str | Path, steps: int = 3, lr: float = 1e-3,
             threads: int = 1, budget: int = 1) -> dict:
    """`steps` GRPO steps on `checkpoint` with a reward that varies on random text (a 1-word length
    budget; a real model that writes sentences needs a larger `budget`, or every sample overruns
    it to the floor); returns steps logged, steps whose update ran, and the largest weight change."""
    import json

    from safetensors.torch import load_file

    from rlvr import config as config_mod
    from rlvr.train import train

    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    data = run_dir / "prompts.jsonl"
    data.write_text("".join(json.dumps({"prompt": p, "verifier": "length_budget"}) + "\n" for p in PROMPTS))
    cfg = config_mod.load(None, [
        f"model.path={checkpoint}", f"run.dir={run_dir / 'run'}", "data.task=", f"data.train_path={data}",
        f"data.verifier_options={{length_budget: {{budget: {budget}}}}}", f"grpo.steps={steps}",
        "grpo.group_size=4",
        "grpo.prompts_per_step=3", f"grpo.lr={lr}", "rollout.max_new_tokens=24", "run.eval_every=0",
        "run.progress=false", "run.report=false", f"run.threads={threads}", "run.transcripts_every=0",
        "data.heldout_size=0", "run.save_every=0", "doctor.enabled=false"])
    train(cfg)
    before = load_file(str(Path(checkpoint) / "model.safetensors"))
    after = load_file(str(run_dir / "run" / "final" / "model.safetensors"))
    change = max(float((after[k].float() - before[k].float()).abs().max()) for k in before if k in after)
    lines = [json.loads(line) for line in (run_dir / "run" / "metrics.jsonl").read_text().splitlines()]
    steps_logged = [r for r in lines if "reward/mean" in r]
    return {"steps": len(steps_logged), "updated_steps": sum(r.get("grad_norm", 0) > 0 for r in steps_logged),
            "max_weight_change": change}
