"""vLLM servers placed by Ray (`rollout.engine: vllm_server`, `rollout.ray_address: local`).

The trainer side runs here, in the main environment (Ray, no vLLM); the servers run under the
vLLM interpreter (`.venv-vllm`, `make venv-vllm`) as processes the Ray actors start in their
placement-group bundles. Checked: the servers are not this process's children (Ray placed them),
behaviour log-probs match this environment's forward (its transformers is not the servers'),
a push keeps the canary small, and a server killed with kill -9 is started again in its bundle
with the call's samples unchanged.
"""

from __future__ import annotations

import os
import random
import signal
from pathlib import Path

import pytest
import torch

pytest.importorskip("ray")
OPTIONS = {"max_model_len": 128, "kv_cache_memory_bytes": 256 * 2**20}


def _python() -> str:
    from rlvr.errors import ConfigError
    from rlvr.rollout.vllm.launch import server_python

    try:
        return server_python(os.environ.get("RLVR_VLLM_PYTHON", ""))
    except ConfigError as exc:
        pytest.skip(f"no interpreter with vLLM for the servers: {exc}")


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _max_delta(policy, groups) -> float:
    from rlvr.models.policy import completion_logits, token_logprobs

    worst = 0.0
    with torch.no_grad():
        for g in groups:
            for c in g.completions:
                p, t = torch.tensor([g.prompt_ids]), torch.tensor([c.token_ids])
                logits = completion_logits(policy, p, torch.ones_like(p), t, torch.ones_like(t))
                mine = token_logprobs(logits.float(), t)[0]
                worst = max(worst, float((mine - torch.tensor(c.logprobs)).abs().max()))
    return worst


def test_servers_placed_by_ray(monkeypatch):
    from rlvr.models.policy import load_policy
    from rlvr.rollout.base import SamplingParams
    from rlvr.rollout.vllm.servers import VLLMServerEngine
    from rlvr.tasks.arithmetic import ArithmeticTask

    python = _python()
    policy, tok = load_policy("builtin:tiny-llama", seed=0)
    problems = ArithmeticTask(2).sample(random.Random(0), 6, "train")
    params = SamplingParams(max_new_tokens=12)
    engine = VLLMServerEngine(policy, tok, servers=2, python=python, options=OPTIONS, ray_address="local")
    pids = [s.pid for s in engine.servers]
    try:
        assert all(_parent(p) != os.getpid() for p in pids), pids
        groups = engine.generate(problems, 4, params, seed=3)
        assert [g.problem.id for g in groups] == [p.id for p in problems]
        delta = _max_delta(policy, groups)
        with torch.no_grad():
            policy.model.layers[0].mlp.down_proj.weight.mul_(1.5)
        engine.load_weights(policy, 1)
        engine.generate(problems, 2, params, seed=4)
        engine.load_weights(policy, 2)
        print(f"Ray-placed servers: max |Δ log-prob| vs this forward {delta:.1e}; canary {engine.sync_metrics}")
        assert delta < 1e-3 and engine.sync_metrics["mismatch/canary_kl"] < 1e-6
        expected = engine.generate(problems, 4, params, seed=5)
        os.kill(pids[0], signal.SIGKILL)
        again = engine.generate(problems, 4, params, seed=5)
        assert engine.restarts == 1 and engine.servers[0].pid != pids[0]
        assert [[c.token_ids for c in g.completions] for g in again] == \
            [[c.token_ids for c in g.completions] for g in expected]
        pids.append(engine.servers[0].pid)
    finally:
        engine.close()
    assert not [p for p in pids if Path(f"/proc/{p}").exists()], pids
