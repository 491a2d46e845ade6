"""The GPU micro-batch budget (`gpu_forward.micro_batch_tokens`) against the bytes autograd really
keeps, counted on the CPU with saved-tensor hooks (`torch.autograd.graph.saved_tensors_hooks`),
and the forward a wrapped (DDP/FSDP2) model takes on a GPU: the chunked head through the
wrapper's own call, not the full-vocabulary logits the budget does not count (a torchrun run
went out of memory at its first update).

Predicted at the default budget on an 80 GiB card, float32 master weights, no checkpointing
(`predicted`; activations = budget tokens × `token_bytes`, plus the training state):
  Qwen2.5-0.5B (494M parameters)   one GPU: 20,480 tokens, 36.7 GB kept + 8.9 GB state
                                   DDP:     18,432 tokens, 37.4 GB kept + 10.9 GB state
  Qwen2.5-1.5B (1.54B parameters)  one GPU:  7,168 tokens, 26.7 GB kept + 27.8 GB state
                                   DDP:      5,120 tokens, 21.7 GB kept + 34.0 GB state
(the other half of what is left covers the reference, the chunked head and the KV cache).
Unverified on a GPU: bench/gpu_check.sh measures the peak there.
"""

import copy

import pytest
import torch

from rlvr.models.device import Device
from rlvr.models.tiny import build_model
from rlvr.training import forward, gpu_forward
from rlvr.training.update import Compute

torch.set_num_threads(1)
GIB = 1024 ** 3
GPU = Device(torch.device("cuda", 0))          # only its type is read: no GPU needed
# Qwen2.5-Instruct shapes (config.json of each; no download)
QWEN = {"0.5B": dict(hidden_size=896, intermediate_size=4864, num_attention_heads=14,
                     num_key_value_heads=2, num_hidden_layers=24, vocab_size=151936),
        "1.5B": dict(hidden_size=1536, intermediate_size=8960, num_attention_heads=12,
                     num_key_value_heads=2, num_hidden_layers=28, vocab_size=151936)}


def _qwen(name: str, layers: int | None = None, vocab: int | None = None, device: str = "cpu"):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    shape = dict(QWEN[name])
    shape["num_hidden_layers"] = layers or shape["num_hidden_layers"]
    shape["vocab_size"] = vocab or shape["vocab_size"]
    cfg = Qwen2Config(**shape, tie_word_embeddings=True, attn_implementation="sdpa")
    torch.manual_seed(0)
    with torch.device(device):
        return Qwen2ForCausalLM(cfg)


def saved_bytes(fn) -> int:
    """Bytes of the storages autograd keeps for backward while `fn` runs (parameters and
    storages that existed before excluded; a storage counted once however many views)."""
    seen: dict[int, int] = {}

    def pack(t):
        if not isinstance(t, torch.nn.Parameter):
            seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return sum(seen.values())


def per_token(fwd, vocab: int, width: int = 32) -> float:
    """The slope of saved bytes in rows (2 → 4 rows of 2·`width` tokens): bytes one token keeps."""
    out = []
    for rows in (2, 4):
        ids = torch.randint(0, vocab, (rows, width), generator=torch.Generator().manual_seed(rows))
        mask = torch.ones_like(ids)
        out.append(saved_bytes(lambda ids=ids, mask=mask: fwd(ids, mask, ids, mask, 1.0)))
    return (out[1] - out[0]) / (2 * 2 * width)


def _ddp(model):
    from torch.nn.parallel import DistributedDataParallel
    return DistributedDataParallel(model)


@pytest.mark.parametrize("name", ["0.5B", "1.5B"])
def test_kept_bytes_per_token_within_the_estimate_of_each_variant(name, one_rank_group):
    """Two layers at the real widths (a smaller vocabulary: the chunked head keeps no [T, V]);
    the estimate is per layer, so the slope over two layers must be within two layers' estimate."""
    model = _qwen(name, layers=2, vocab=32768)
    d, m = model.config.hidden_size, model.config.intermediate_size
    cpu = Device.cpu()
    for kind, fwd in (("fused", gpu_forward.build(model, device=cpu, autocast=True)),
                      ("wrapped", gpu_forward.build(_ddp(model), device=cpu, autocast=True,
                                                    wrapped=True))):
        assert gpu_forward.variant(model, wrapped=kind == "wrapped") == kind
        kept = per_token(fwd, 32768)
        assert kept <= gpu_forward.token_bytes(d, m, 2, kind=kind), (kind, kept)
        assert kept >= 0.5 * gpu_forward.token_bytes(d, m, 2, kind=kind), (kind, kept)   # not slack


def test_ddp_on_a_gpu_takes_the_chunked_head_and_its_budget_counts_it(one_rank_group):
    """The forward chosen for a DDP model on a GPU keeps what the budget counts (before: the
    model's own forward, whose [B, T, V] logits are several times the estimate)."""
    model = _qwen("0.5B", layers=2, vocab=32768)
    ddp = _ddp(model)
    assert forward.backend_name(ddp, Compute(device=GPU)) == "gpu"
    fwd = gpu_forward.build(ddp, device=Device.cpu(), autocast=True, wrapped=forward.is_wrapped(ddp))
    kind = gpu_forward.variant(ddp, wrapped=True)
    kept = per_token(fwd, 32768)
    assert kept <= gpu_forward.token_bytes(896, 4864, 2, kind=kind)
    budget = gpu_forward.micro_batch_tokens(0, ddp, GPU, False, total_bytes=80 * GIB)
    state = gpu_forward.state_bytes(sum(p.numel() for p in model.parameters()), "ddp")
    assert budget == gpu_forward.micro_batch_budget(80 * GIB - state, 896, 4864, 2, kind="wrapped")


@pytest.mark.parametrize("mode", ["ddp", "fsdp2"])
def test_wrapped_chunked_forward_equals_the_plain_model(mode, one_rank_group):
    """Log-probs, entropies and every gradient through the wrapper's call and the chunked head
    equal the unwrapped model's full-logit forward (FSDP2: the root's head weight is read
    gathered after the forward, and its gradient reaches the sharded parameter)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    from rlvr.models.policy import completion_logits, token_logprobs

    model, _ = build_model(seed=0, hidden=32, layers=2, heads=4, mlp=64)
    plain = copy.deepcopy(model)
    if mode == "ddp":
        wrapped = _ddp(model)
    else:
        for layer in model.model.layers:
            fully_shard(layer, mesh=init_device_mesh("cpu", (1,)))
        wrapped = fully_shard(model, mesh=init_device_mesh("cpu", (1,)))
    g = torch.Generator().manual_seed(0)
    pi, ci = torch.randint(3, 20, (3, 5), generator=g), torch.randint(3, 20, (3, 4), generator=g)
    pm, cm = torch.ones_like(pi), torch.ones_like(ci)
    pm[0, :2] = 0
    fwd = gpu_forward.build(wrapped, device=Device.cpu(), autocast=False, chunk_rows=4,
                            wrapped=forward.is_wrapped(wrapped))
    logp, _ = fwd(pi, pm, ci, cm, 0.7)
    want = token_logprobs(completion_logits(plain, pi, pm, ci, cm).float() / 0.7, ci)
    torch.testing.assert_close(logp, want, atol=1e-5, rtol=1e-5)
    (logp * torch.arange(12.0).view(3, 4)).sum().backward()
    (want * torch.arange(12.0).view(3, 4)).sum().backward()
    for (name, p), q in zip(wrapped.named_parameters(), plain.parameters()):
        grad = p.grad.full_tensor() if hasattr(p.grad, "full_tensor") else p.grad
        torch.testing.assert_close(grad, q.grad, atol=1e-5, rtol=1e-4, msg=name)


def test_fsdp2_state_is_divided_by_the_world_size():
    """At 7B FSDP2 on 8 GPUs holds an eighth of the state: the budget no longer collapses to the
    1,024-token floor (the global state, 137 GB, was counted on each card): 3,072 tokens, and
    with per-layer checkpointing over 30k."""
    params, outside, layer = 7_615_616_512, 1_089_994_752, 233_057_792   # Qwen2.5-7B
    one = gpu_forward.state_bytes(params)
    sharded = gpu_forward.state_bytes(params, "fsdp2", 8, outside, layer)
    assert sharded < one / 4
    room = 80 * GIB - sharded
    assert gpu_forward.micro_batch_budget(room, 3584, 18944, 28, kind="wrapped") == 3072
    assert gpu_forward.micro_batch_budget(room, 3584, 18944, 28, True, kind="wrapped") > 30 * 1024
    assert gpu_forward.micro_batch_budget(80 * GIB - one, 3584, 18944, 28, kind="wrapped") == 1024


def test_a_colocated_engine_share_comes_off_the_budget():
    model, _ = build_model(seed=0, hidden=32, layers=2, heads=4, mlp=64)
    whole = gpu_forward.micro_batch_tokens(0, model, GPU, False, total_bytes=80 * GIB)
    shared = gpu_forward.micro_batch_tokens(0, model, GPU, False, total_bytes=80 * GIB,
                                            engine_share=0.3)
    state = gpu_forward.state_bytes(sum(p.numel() for p in model.parameters()))
    assert shared == gpu_forward.micro_batch_budget(80 * GIB - int(0.3 * 80 * GIB) - state, 32, 64,
                                                    2) < whole


def predicted(name: str, mode: str = "", total: int = 80 * GIB) -> tuple[int, int, int]:
    """(budget tokens, bytes kept by that many tokens, state bytes) at `name`'s shape."""
    model = _qwen(name, device="meta")
    cfg = model.config
    params = sum(p.numel() for p in model.parameters())
    state = gpu_forward.state_bytes(params, mode)
    kind = "wrapped" if mode else "fused"
    budget = gpu_forward.micro_batch_budget(total - state, cfg.hidden_size, cfg.intermediate_size,
                                            cfg.num_hidden_layers, kind=kind)
    kept = budget * gpu_forward.token_bytes(cfg.hidden_size, cfg.intermediate_size,
                                            cfg.num_hidden_layers, kind=kind)
    return budget, kept, state


@pytest.mark.parametrize("name,mode,tokens", [("0.5B", "", 20480), ("0.5B", "ddp", 18432),
                                              ("1.5B", "", 7168), ("1.5B", "ddp", 5120)])
def test_predicted_bytes_at_the_default_budget(name, mode, tokens):
    """The module docstring's table (meta tensors: the shapes without the memory)."""
    budget, kept, state = predicted(name, mode)
    assert budget == tokens
    assert kept + state <= 0.5 * 80 * GIB + state <= 80 * GIB
