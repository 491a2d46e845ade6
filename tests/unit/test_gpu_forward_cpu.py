"""The GPU training forward (`training.gpu_forward`), run on the CPU where it can be: LoRA's KL
reference (adapters disabled, a callable without `config`) goes through its own full-logit
forward and gives the base model's log-probs, instead of failing at the first update with β > 0."""

import copy
from types import SimpleNamespace

import pytest
import torch

from rlvr.models.device import Device
from rlvr.models.policy import completion_logits, token_logprobs
from rlvr.models.tiny import build_model
from rlvr.training import gpu_forward

torch.set_num_threads(1)


def test_lora_reference_without_config_runs_its_own_forward():
    pytest.importorskip("peft")
    from rlvr.models.lora import AdaptersDisabled, apply_lora

    base, _ = build_model(seed=0, hidden=32, layers=2, heads=4, mlp=64)
    plain = copy.deepcopy(base)
    lora = SimpleNamespace(r=4, alpha=8, dropout=0.0, target_modules=("q_proj", "v_proj"))
    policy = apply_lora(base, lora, "builtin:tiny-llama")
    with torch.no_grad():                      # adapters that change the output
        for name, p in policy.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)
    reference = AdaptersDisabled(policy)
    assert not hasattr(reference, "config") and gpu_forward.variant(reference) == "full"
    g = torch.Generator().manual_seed(0)
    pi, ci = torch.randint(3, 20, (3, 5), generator=g), torch.randint(3, 20, (3, 4), generator=g)
    pm, cm = torch.ones_like(pi), torch.ones_like(ci)
    fwd = gpu_forward.build(reference, device=Device.cpu(), autocast=False)
    with torch.no_grad():
        logp, ent = fwd(pi, pm, ci, cm, 1.0)
        want = token_logprobs(completion_logits(plain, pi, pm, ci, cm).float(), ci)
        adapted = token_logprobs(completion_logits(policy, pi, pm, ci, cm).float(), ci)
    torch.testing.assert_close(logp, want, atol=1e-5, rtol=0)
    assert float((adapted - want).abs().max()) > 1e-3       # the adapters were really off
    assert ent.shape == logp.shape


QWEN_05B = dict(hidden=896, intermediate=4864, layers=24)


def test_gpu_micro_batch_default_fits_free_memory():
    """`grpo.micro_batch_tokens: 0` on a GPU no longer means the whole minibatch: at the 0.5B shape
    256 x 1.3k tokens would need hundreds of GB of activations by the same estimate."""
    gb = 1024 ** 3
    whole = 256 * 1300
    per_token = (40 * 896 + 8 * 4864) * 24
    assert whole * per_token > 300 * gb
    budget = gpu_forward.micro_batch_budget(100 * gb, **QWEN_05B)
    assert 1024 <= budget < whole and budget % 1024 == 0
    assert budget * per_token <= 0.5 * 100 * gb
    assert gpu_forward.micro_batch_budget(10 * gb, **QWEN_05B) < budget          # less memory, fewer
    assert gpu_forward.micro_batch_budget(100 * gb, **QWEN_05B, checkpointing=True) > 4 * budget
    assert gpu_forward.micro_batch_budget(1, **QWEN_05B) == 1024                  # never 0 (= no split)


def test_micro_batch_tokens_zero_means_a_budget_on_a_gpu_only():
    """From the device's total memory less the training state (18 B a parameter), so a resumed
    run gets the budget of the run it resumes whatever else holds memory then."""
    model, _ = build_model(seed=0, hidden=32, layers=2, heads=4, mlp=64)
    gpu = Device(torch.device("cuda", 0))        # only its type is read: no GPU needed
    gb = 1024 ** 3
    state = 18 * sum(p.numel() for p in model.parameters())
    assert gpu_forward.micro_batch_tokens(0, model, Device.cpu(), False) == 0
    assert gpu_forward.micro_batch_tokens(4096, model, gpu, False, total_bytes=gb) == 4096
    auto = gpu_forward.micro_batch_tokens(0, model, gpu, False, total_bytes=gb)
    assert auto == gpu_forward.micro_batch_budget(gb - state, 32, 64, 2) > 0
    assert gpu_forward.micro_batch_tokens(0, model, gpu, False, total_bytes=gb) == auto   # no measuring
    wrapper = torch.nn.Module()
    wrapper.module = model                       # DDP: the shape is read from the wrapped model,
    ddp_state = (18 + 4) * sum(p.numel() for p in model.parameters())   # its buckets counted
    assert gpu_forward.micro_batch_tokens(0, wrapper, gpu, False, total_bytes=gb) == \
        gpu_forward.micro_batch_budget(gb - ddp_state, 32, 64, 2, kind="wrapped")
    assert gpu_forward.micro_batch_tokens(0, object(), gpu, False, total_bytes=gb) == 16384
    big = gpu_forward.micro_batch_tokens(0, model, gpu, False, total_bytes=140 * gb)
    assert big > auto                            # more memory, larger budget
