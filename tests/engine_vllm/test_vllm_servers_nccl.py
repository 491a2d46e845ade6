"""`rollout.vllm_transport: nccl` on GPUs: weights broadcast from the trainer's GPU to a server's.

Marked `gpu` and skipped without 2 CUDA devices (NCCL refuses two ranks of one group on the same
GPU, so the server needs a GPU of its own: it is given device 1, the trainer keeps device 0), and
without a CUDA build of vLLM. **Never run**: no such machine was available to this work, so the
NCCL transport is unverified. What it checks: after a push of perturbed weights each server's hash
of the tensors it received equals the trainer's (the engine raises otherwise), greedy outputs
change, the canary is small, and restoring the weights restores the outputs.
"""

from __future__ import annotations

import random

import pytest
import torch

pytestmark = pytest.mark.gpu
pytest.importorskip("vllm", reason="vllm is not installed here")
if torch.cuda.device_count() < 2:
    pytest.skip("needs 2 CUDA devices (trainer on one, the server on another)", allow_module_level=True)


def _ids(groups):
    return [[c.token_ids for c in g.completions] for g in groups]


def test_weights_reach_a_gpu_server_by_nccl_broadcast(monkeypatch):
    from rlvr.models.policy import load_policy
    from rlvr.rollout.base import SamplingParams
    from rlvr.rollout.vllm.servers import VLLMServerEngine
    from rlvr.tasks.arithmetic import ArithmeticTask

    policy, tok = load_policy("builtin:tiny-llama", seed=0)
    policy = policy.to("cuda:0")            # CUDA starts here with every device visible
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")   # read by the server process only
    engine = VLLMServerEngine(policy, tok, servers=1, transport="nccl",
                              options={"max_model_len": 128, "gpu_memory_utilization": 0.2})
    try:
        problems = ArithmeticTask(2).sample(random.Random(0), 6, "train")
        greedy = SamplingParams(max_new_tokens=12, greedy=True)
        before = _ids(engine.generate(problems, 1, greedy, seed=0))
        saved = {k: v.clone() for k, v in policy.state_dict().items()}
        with torch.no_grad():
            for p in policy.parameters():
                p.add_(0.2 * torch.randn_like(p))
        engine.load_weights(policy, 1)        # the hash of what the server received is checked
        assert _ids(engine.generate(problems, 1, greedy, seed=0)) != before
        engine.load_weights(policy, 2)
        print(f"NCCL push, canary: {engine.sync_metrics}")
        assert engine.sync_metrics["mismatch/canary_kl"] < 1e-4   # GPU kernels: not bitwise the trainer's
        policy.load_state_dict(saved)
        engine.load_weights(policy, 3)
        assert _ids(engine.generate(problems, 1, greedy, seed=0)) == before
    finally:
        engine.close()
