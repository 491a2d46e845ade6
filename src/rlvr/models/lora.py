"""LoRA adapters through PEFT (extra `lora`: pip install -e '.[lora]'; imported only when model.lora.r > 0).

`apply_lora` wraps the policy in a `peft` LoRA model: only the adapters train, the base stays
frozen. What reads the weights knows about the adapters:
- the fused forward (`fused_llama.supports`) steps aside for PEFT models, so the trainer runs
  PEFT's own forward and never the bare base weights;
- the KL reference is the same model with its adapters disabled (`AdaptersDisabled`), no copy;
- the rollout engine holds a plain model and receives merged weights, W + ΔW per adapted layer
  (`engine_state`), computed from PEFT's `get_delta_weight` without merging in place (merging and
  unmerging in place would round the base weights a little at every sync);
- checkpoints and `final/` hold the adapters (`adapter_model.safetensors`, `adapter_config.json`
  naming the base path); `load_adapter_weights` restores them for resume, and
  `PeftModel.from_pretrained(base, path)` loads them anywhere.
Not guaranteed: other PEFT methods (only LoRA is configured here) or several adapters at once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch


def is_peft(model) -> bool:
    return hasattr(model, "peft_config")


def apply_lora(model, lora, base_path: str, seed: int = 0):
    """`model` wrapped with a fresh LoRA adapter from config section `model.lora`; the adapter's
    random initialisation is drawn from `seed`, not from whatever the global RNG holds."""
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                        target_modules=list(lora.target_modules), task_type="CAUSAL_LM")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        wrapped = get_peft_model(model, config)
    wrapped.peft_config["default"].base_model_name_or_path = base_path
    return wrapped


class AdaptersDisabled:
    """The base model of a PEFT policy, as a callable module stand-in for the KL reference."""

    def __init__(self, policy):
        self.policy = policy

    def __call__(self, *args, **kwargs):
        with self.policy.disable_adapter():
            return self.policy(*args, **kwargs)


def engine_state(policy) -> dict[str, torch.Tensor]:
    """The state dict of a plain (un-wrapped) model with the policy's adapters merged in."""
    if not is_peft(policy):
        return policy.state_dict()
    base = policy.get_base_model()
    out: dict[str, torch.Tensor] = {}
    for name, module in base.named_modules():
        if hasattr(module, "base_layer") and hasattr(module, "get_delta_weight"):
            weight = module.base_layer.weight.detach()
            for adapter in module.active_adapters:
                if adapter in getattr(module, "lora_A", {}):
                    weight = weight + module.get_delta_weight(adapter).to(weight.dtype)
            out[f"{name}.weight"] = weight
    for key, value in base.state_dict().items():
        if "lora_" in key:
            continue
        plain = key.replace(".base_layer.", ".")
        out.setdefault(plain, value)
    return out


def load_adapter_weights(model, ckpt: Path) -> None:
    """Put the adapter saved in checkpoint `ckpt` into the PEFT `model` (resume)."""
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    result: Any = set_peft_model_state_dict(model, load_file(str(ckpt / "adapter_model.safetensors")))
    if result.unexpected_keys:
        raise RuntimeError(f"checkpoint {ckpt}: adapter does not match the model "
                           f"(unexpected {result.unexpected_keys[:3]})")
