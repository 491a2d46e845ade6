"""The embedded default model: a ~1M-parameter Llama with a character-level tokenizer.

Built with `tokenizers` (a WordLevel model over single characters) and `transformers`
(`LlamaForCausalLM`), then saved with `save_pretrained`, so the result is an ordinary Hugging Face
checkpoint that transformers loads like any other. Weights are randomly initialised
from `seed`: the model learns the task from the SFT cold start and GRPO, nothing is pre-trained.
"""

from __future__ import annotations

from pathlib import Path

CHARS = list("0123456789+-=|>") + [" "]
# `builtin:tiny-llama-ascii`: printable ASCII and newline, for tasks written in English (reasoning-gym).
ASCII_CHARS = [chr(c) for c in range(32, 127)] + ["\n"]
SPECIALS = ["<pad>", "<bos>", "<eos>", "<unk>"]


def build_tokenizer(chars: list[str] | None = None, max_length: int = 128):
    """A character-level fast tokenizer (left padding, BOS prepended, EOS as the stop token)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(SPECIALS + (chars or CHARS))}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tok.post_processor = processors.TemplateProcessing(
        single="<bos> $A", special_tokens=[("<bos>", vocab["<bos>"])])
    # padding_side must be given to the constructor: set afterwards, save_pretrained drops it.
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<bos>", eos_token="<eos>", pad_token="<pad>",
        unk_token="<unk>", padding_side="left", model_max_length=max_length)


def build_model(seed: int = 0, hidden: int = 128, layers: int = 4, heads: int = 4,
                mlp: int = 512, max_positions: int = 128, chars: list[str] | None = None):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = build_tokenizer(chars, max_positions)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=hidden, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=heads, intermediate_size=mlp,
        max_position_embeddings=max_positions, tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, torch_dtype="float32")  # type: ignore[call-arg]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


def save_tiny_model(path: str | Path, seed: int = 0, **options) -> Path:
    """Build the tiny model and tokenizer and save both as a Hugging Face checkpoint at `path`
    (`options` go to `build_model`: e.g. `chars`, `max_positions`)."""
    from rlvr.models.quiet import quiet_transformers

    quiet_transformers()
    path = Path(path)
    model, tokenizer = build_model(seed, **options)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
