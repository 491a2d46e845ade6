"""On a CUDA GPU: the paths no CPU test reaches. The graph decode equals the eager step over
repeated calls with freed memory poisoned in between; graphs captured in a background thread while
another thread allocates; the model-forward decode with a host generator (the episode loop's);
a LoRA update with β > 0 (the adapters-disabled reference); the default micro-batch budget.

Marked `gpu`: collected everywhere, skipped without CUDA (tests/conftest.py).
"""

from __future__ import annotations

import threading

import pytest
import torch

pytestmark = pytest.mark.gpu
PROMPTS = ("12+345=", "7+8=", "905+46=", "3+4=")


def _setup(bf16: bool = False):
    from rlvr.models.device import Device
    from rlvr.models.tiny import build_model
    from rlvr.rollout.hf import HFEngine

    model, tok = build_model(seed=3, hidden=128, layers=4, heads=4, mlp=256)
    with torch.no_grad():       # larger weights than the init: greedy paths that differ by prompt
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0, 0.3)
    device = Device.resolve("cuda", bf16=bf16)
    model.to(device.torch).eval()
    engine = HFEngine(model, tok, device=device, use_chat_template=False)
    return model, engine, device


def _decoder(engine, graphs: bool):
    from rlvr.rollout.cuda_decode import GraphDecoder

    dtype = torch.bfloat16 if engine.autocast_bf16 else torch.float32
    return GraphDecoder(engine.model, engine.device, dtype, engine.pad_id, engine.eos_ids,
                        engine.vocab_limit, use_graphs=graphs)


def _poison(device, blocks: int = 64) -> list[torch.Tensor]:
    """Take freed blocks of the caching allocator and fill them with NaN (held by the caller while
    the next decode runs): a graph reading a tensor nobody owns reads these."""
    nan = float("nan")
    return [torch.full((n,), nan, device=device.torch) for n in (256, 2048, 16384, 131072)
            for _ in range(blocks)]


def _ids(engine, order: int) -> list[list[int]]:
    prompts = list(PROMPTS[order:] + PROMPTS[:order])
    return [engine.tokenizer(p)["input_ids"] for p in prompts]


def _same(ours, ref, atol: float) -> None:
    assert [r[0] for r in ours] == [r[0] for r in ref]
    worst = max((abs(a - b) for (_, la, _), (_, lb, _) in zip(ours, ref) for a, b in zip(la, lb)),
                default=0.0)
    assert worst < atol, worst


def test_graph_decode_equals_eager_over_repeated_calls_with_freed_memory_poisoned():
    from rlvr.rollout.base import SamplingParams

    _, engine, device = _setup()
    graphs, eager = _decoder(engine, True), _decoder(engine, False)
    greedy = SamplingParams(max_new_tokens=24, greedy=True)
    held = []
    for call in range(4):
        ours = graphs.decode(_ids(engine, call), 2, greedy, seed=0)
        _same(ours, eager.decode(_ids(engine, call), 2, greedy, seed=0), atol=1e-3)
        held.append(_poison(device))
    assert len(graphs.plans) == 1                      # the later calls replayed the first capture
    sampled = SamplingParams(temperature=0.8, max_new_tokens=24)
    first = graphs.decode(_ids(engine, 0), 4, sampled, seed=7)
    held.append(_poison(device))
    assert graphs.decode(_ids(engine, 0), 4, sampled, seed=7) == first


def test_graphs_captured_in_a_background_thread_while_the_main_thread_allocates():
    from rlvr.rollout.base import SamplingParams

    _, engine, device = _setup(bf16=True)
    params = SamplingParams(max_new_tokens=24, greedy=True)
    graphs, out, errors = _decoder(engine, True), [], []
    stop = threading.Event()

    def sample():
        try:
            out.append(graphs.decode(_ids(engine, 0), 4, params, seed=0))
        except BaseException as exc:      # reported below, in the test's thread
            errors.append(exc)
        finally:
            stop.set()

    thread = threading.Thread(target=sample)
    thread.start()
    while not stop.is_set():             # what the trainer thread does meanwhile
        x = torch.randn(1024, 1024, device=device.torch)
        (x @ x).sum().item()
    thread.join()
    assert not errors, errors
    _same(out[0], _decoder(engine, False).decode(_ids(engine, 0), 4, params, seed=0), atol=0.05)


def test_model_forward_decode_takes_a_host_generator():
    from rlvr.models.device import Device
    from rlvr.rollout.base import SamplingParams
    from rlvr.rollout.hf import HFEngine
    from rlvr.testing import zoo

    model, tok = zoo.build("gpt2")                     # not a fused family: hf_decode
    device = Device.resolve("cuda")
    engine = HFEngine(model.to(device.torch), tok, device=device, use_chat_template=False)
    params = SamplingParams(temperature=1.0, max_new_tokens=8)
    prefixes = [tok(p)["input_ids"] for p in PROMPTS]
    rows = engine.continue_ids(prefixes, params, torch.Generator().manual_seed(0))
    assert len(rows) == len(PROMPTS) and all(r[0] for r in rows)
    assert engine.continue_ids(prefixes, params, torch.Generator().manual_seed(0)) == rows


def test_lora_update_with_a_kl_reference():
    pytest.importorskip("peft")
    from types import SimpleNamespace

    from rlvr.models.lora import AdaptersDisabled, apply_lora
    from rlvr.rollout.base import SamplingParams
    from rlvr.tasks.arithmetic import make_problem
    from rlvr.algo.losses import LossSpec
    from rlvr.models.batch import build_batch
    from rlvr.training.update import Compute, UpdateSpec, update_policy

    model, engine, device = _setup()
    problems = [make_problem(12, 345, "+"), make_problem(7, 8, "+")]
    groups = engine.generate(problems, 4, SamplingParams(max_new_tokens=12), seed=0)
    policy = apply_lora(model, SimpleNamespace(r=4, alpha=8, dropout=0.0,
                                               target_modules=("q_proj", "v_proj")), "tiny")
    batch = build_batch(groups, torch.randn(2, 4), engine.pad_id)
    opt = torch.optim.AdamW([p for p in policy.parameters() if p.requires_grad], lr=1e-3)
    spec = UpdateSpec(LossSpec(beta=0.04))
    stats = update_policy(policy, opt, batch, spec, reference=AdaptersDisabled(policy),
                          compute=Compute(device))
    assert torch.isfinite(torch.tensor(stats["loss"])) and "kl" in stats


def test_default_micro_batch_budget_on_this_gpu():
    from rlvr.training import gpu_forward

    model, _, device = _setup()
    total = torch.cuda.get_device_properties(device.torch).total_memory
    budget = gpu_forward.micro_batch_tokens(0, model, device, False)
    assert budget == gpu_forward.micro_batch_tokens(0, model, device, False, total_bytes=total) >= 1024
    print(f"total {total / 2**30:.1f} GiB -> micro_batch_tokens {budget}")
