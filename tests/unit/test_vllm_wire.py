"""`rollout.vllm_wire` on real loopback sockets: the handshake proves the key both ways within its
deadlines, a frame altered, replayed or oversized is refused, and nothing in a frame is executed."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from rlvr.rollout.vllm import wire as vllm_wire

KEY = b"k" * 16


@pytest.fixture
def server():
    """A listener whose authenticated channels land in a list (the server's own accept loop)."""
    listener = socket.create_server(("127.0.0.1", 0))
    got: list = []
    threading.Thread(target=vllm_wire.serve_channels, args=(listener, KEY, got.append), daemon=True).start()
    yield listener.getsockname(), got
    listener.close()


def _wait(got, n=1, timeout=5.0):
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        time.sleep(0.01)
    return got[n - 1]


def test_round_trip_and_a_silent_peer_blocks_nobody(server):
    address, got = server
    silent = socket.create_connection(address)
    client = vllm_wire.connect(address, KEY, timeout_s=2)
    peer = _wait(got)
    client.send({"op": "generate", "prompts": [[1, 2]], "x": float("-inf")})
    assert peer.recv() == {"op": "generate", "prompts": [[1, 2]], "x": float("-inf")}
    peer.send({"outputs": [[[1], [-0.5], "stop", "a"]]})
    assert client.recv() == {"outputs": [[[1], [-0.5], "stop", "a"]]}
    silent.close()


def test_wrong_key_either_way(server):
    address, got = server
    with pytest.raises(ConnectionError):
        vllm_wire.connect(address, b"wrong", timeout_s=2)
    # a server without the key: the client refuses it
    fake = socket.create_server(("127.0.0.1", 0))
    threading.Thread(target=vllm_wire.serve_channels, args=(fake, b"other", got.append), daemon=True).start()
    with pytest.raises(ConnectionError):
        vllm_wire.connect(fake.getsockname(), KEY, timeout_s=2)
    fake.close()


def test_altered_replayed_and_oversized_frames_are_refused(server):
    address, got = server
    client = vllm_wire.connect(address, KEY, timeout_s=2)
    peer = _wait(got)
    body = b'{"op":"ping"}'
    frames = [len(body).to_bytes(8, "big") + body + client._mac(client.out, 0, body)]
    client.sock.sendall(frames[0])                     # what client.send({"op": "ping"}) sends
    assert peer.recv() == {"op": "ping"}
    client.sock.sendall(frames[0])                     # replayed
    with pytest.raises(ConnectionError, match="authentication"):
        peer.recv()
    client2 = vllm_wire.connect(address, KEY, timeout_s=2)
    peer2 = _wait(got, 2)
    client2.sock.sendall(frames[0].replace(b"ping", b"stop"))     # altered
    with pytest.raises(ConnectionError, match="authentication"):
        peer2.recv()
    client3 = vllm_wire.connect(address, KEY, timeout_s=2)
    peer3 = _wait(got, 3)
    client3.sock.sendall((vllm_wire.MAX_FRAME + 1).to_bytes(8, "big"))
    with pytest.raises(ConnectionError, match="refused"):
        peer3.recv()


def test_the_server_deadline_drops_a_silent_peer():
    listener = socket.create_server(("127.0.0.1", 0))
    silent = socket.create_connection(listener.getsockname())
    sock, _ = listener.accept()
    start = time.monotonic()
    with pytest.raises(ConnectionError):
        vllm_wire.handshake(sock, KEY, timeout_s=0.3)
    assert time.monotonic() - start < 2
    silent.close()
    listener.close()
