"""The wire between the trainer and its vLLM servers: authenticated JSON frames over TCP.

Not `multiprocessing.connection`: its messages are pickles, so whoever holds (or steals) the key
runs code in the other process, and its handshake has no deadline. Here:

- Handshake (both sides within `HANDSHAKE_S`, or the connection is dropped): the server sends a
  random 32-byte challenge; the client answers HMAC-SHA256(key, "client" + challenge) and a
  challenge of its own; the server checks it (constant time) and answers HMAC(key, "server" +
  the client's challenge), which the client checks. Neither side sends the key.
- Frames: an 8-byte length, the JSON body, and HMAC-SHA256 over (session, direction, sequence
  number, body) with a key derived from both challenges, so a frame cannot be forged, altered,
  replayed or reordered on the way without the key. JSON is data: nothing in a message runs.
  Bodies over `MAX_FRAME` bytes are refused before they are read.
- Not given: confidentiality. The default address is loopback (127.0.0.1); for a server on another
  host, reach it through an SSH tunnel (`ssh -L PORT:127.0.0.1:PORT host`, the server started with
  `--host 127.0.0.1` there) or another encrypted link: prompts and samples cross in clear otherwise.

`connect(address, key)` (client) and `accept(listener, key)` (server) return a `Channel` with
`send(obj)`, `recv()` and `close()`; a failed handshake raises `ConnectionError`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import socket
import struct

HANDSHAKE_S = 5.0      # the server's deadline for a client's proof
CONNECT_S = 30.0       # the client's, for connecting and the server's proof (a server may be busy)
MAX_FRAME = 1 << 30
_MAC = 32


class Channel:
    def __init__(self, sock: socket.socket, session: bytes, client: bool):
        self.sock, self.session = sock, session
        self.out, self.inn = (b"c2s", b"s2c") if client else (b"s2c", b"c2s")
        self.sent = self.got = 0

    def _mac(self, direction: bytes, seq: int, body: bytes) -> bytes:
        return hmac.new(self.session, direction + struct.pack(">Q", seq) + body, hashlib.sha256).digest()

    def send(self, obj) -> None:
        body = json.dumps(obj, separators=(",", ":")).encode()
        mac = self._mac(self.out, self.sent, body)
        self.sent += 1
        self.sock.sendall(struct.pack(">Q", len(body)) + body + mac)

    def recv(self):
        (size,) = struct.unpack(">Q", _read(self.sock, 8))
        if size > MAX_FRAME:
            raise ConnectionError(f"frame of {size} bytes refused (over {MAX_FRAME})")
        body, mac = _read(self.sock, size), _read(self.sock, _MAC)
        if not hmac.compare_digest(mac, self._mac(self.inn, self.got, body)):
            raise ConnectionError("a frame failed its authentication")
        self.got += 1
        return json.loads(body)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "Channel":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _read(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise EOFError("the peer closed the connection")
        buf += chunk
    return bytes(buf)


def _proof(key: bytes, role: bytes, challenge: bytes) -> bytes:
    return hmac.new(key, role + challenge, hashlib.sha256).digest()


def _session(key: bytes, server_nonce: bytes, client_nonce: bytes) -> bytes:
    return hmac.new(key, b"session" + server_nonce + client_nonce, hashlib.sha256).digest()


def connect(address: tuple[str, int], key: bytes, timeout_s: float = CONNECT_S) -> Channel:
    """A client channel to the server at `address`; ConnectionError (an OSError) when it cannot
    connect, or the server does not prove the key, within `timeout_s`."""
    sock = socket.create_connection(address, timeout=timeout_s)
    try:
        server_nonce = _read(sock, 32)
        mine = os.urandom(32)
        sock.sendall(_proof(key, b"client", server_nonce) + mine)
        if not hmac.compare_digest(_read(sock, _MAC), _proof(key, b"server", mine)):
            raise ConnectionError(f"vLLM server {address[0]}:{address[1]} did not prove the key")
        sock.settimeout(None)     # a generate call may take minutes; the server holds its engine
        return Channel(sock, _session(key, server_nonce, mine), client=True)
    except (OSError, EOFError) as exc:
        sock.close()
        raise ConnectionError(f"vLLM server {address[0]}:{address[1]}: handshake failed: {exc}") from None


def handshake(sock: socket.socket, key: bytes, timeout_s: float = HANDSHAKE_S) -> Channel:
    """The server's side for an accepted `sock`: a Channel once the client proves the key within
    `timeout_s`; ConnectionError for a peer that does not (closes, stays silent, answers wrong)."""
    try:
        sock.settimeout(timeout_s)
        nonce = os.urandom(32)
        sock.sendall(nonce)
        answer = _read(sock, _MAC + 32)
        if not hmac.compare_digest(answer[:_MAC], _proof(key, b"client", nonce)):
            raise ConnectionError("a client presented the wrong key")
        sock.sendall(_proof(key, b"server", answer[_MAC:]))
        sock.settimeout(None)     # an authenticated client (the trainer) may pause between calls
        return Channel(sock, _session(key, nonce, answer[_MAC:]), client=False)
    except (OSError, EOFError) as exc:
        sock.close()
        raise ConnectionError(f"handshake failed: {type(exc).__name__}: {exc}") from None


def serve_channels(listener: socket.socket, key: bytes, ready) -> None:
    """Accept forever on `listener`, each handshake in a thread of its own (a silent or slow peer
    holds only its own thread, for at most `HANDSHAKE_S`), handing every authenticated channel to
    `ready(channel)`. Run it in a daemon thread."""
    import threading

    def one(sock: socket.socket) -> None:
        try:
            ready(handshake(sock, key))
        except ConnectionError:
            pass

    while True:
        try:
            sock, _ = listener.accept()
        except OSError:
            continue
        threading.Thread(target=one, args=(sock,), daemon=True).start()
