"""`python -m rlvr.verifiers.serve VERIFIER`: a built-in verifier as a reward service over HTTP.

So that a sandbox (or any verifier) can run on another machine than the trainer, which reaches it
through a `{service: URL}` reward term (`rlvr.verifiers.service` holds the JSON schema).

  python -m rlvr.verifiers.serve code --options '{"workers": 8}' --port 8410

Endpoints: `POST /score` (the schema's request -> its response), `GET /health` ({"verifier": name}).
It listens on 127.0.0.1 unless `--host` says otherwise, and a non-loopback address needs a token:
`--token-env VAR` names an environment variable whose value every request must send as
`Authorization: Bearer <value>` (compared in constant time; a wrong or missing one gets 401).
Requests are JSON only (never pickle), at most `--max-mb` MiB (413 beyond, or without a
Content-Length), each connection has `--timeout-s` per socket operation, and at most
`--concurrency` requests score at once (the others wait). The first line on stdout is
`listening on http://HOST:PORT` (with `--port 0` the port the system chose).
Not guaranteed: TLS (put it behind a proxy that terminates TLS for traffic that leaves the host).
"""

from __future__ import annotations

import argparse
import hmac
import ipaddress
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from rlvr.types import Problem
from rlvr.verifiers.base import get_verifier, score_with_ids


def score_request(verifier, body: Any) -> dict[str, Any]:
    """The response to one request body; ValueError when the body breaks the schema."""
    if not isinstance(body, dict) or not isinstance(body.get("responses"), list) \
            or not isinstance(body.get("problems"), list) or len(body["responses"]) != len(body["problems"]):
        raise ValueError("expected {'responses': [str], 'problems': [object]} of equal length")
    responses = [r if isinstance(r, str) else str(r) for r in body["responses"]]
    problems = []
    for i, p in enumerate(body["problems"]):
        if not isinstance(p, dict) or not isinstance(p.get("metadata", {}), dict):
            raise ValueError(f"problems[{i}] must be an object with an optional 'metadata' object")
        problems.append(Problem(str(p.get("id", i)), p.get("prompt", ""), p.get("reference"),
                                str(p.get("verifier", "")), dict(p.get("metadata") or {})))
    ids = body.get("completion_ids")
    scores = (score_with_ids(verifier, responses, problems, ids) if isinstance(ids, list)
              and len(ids) == len(responses) else verifier.score_batch(responses, problems))
    return {"scores": [{"reward": s.reward, "correct": s.correct, "flags": list(s.flags),
                        "extracted": s.extracted, "details": s.details or {}} for s in scores]}


class Handler(BaseHTTPRequestHandler):
    """One connection; `bind` sets the verifier, token, size limit and timeout of a server."""

    verifier: Any = None
    token = ""
    max_bytes = 0
    slots = threading.Semaphore(1)
    protocol_version = "HTTP/1.1"

    @classmethod
    def bind(cls, verifier, token: str, max_bytes: int, timeout_s: float, concurrency: int) -> type:
        # timeout: per socket operation, so a stalled client frees its thread
        return type("BoundHandler", (cls,), {"verifier": verifier, "token": token, "max_bytes": max_bytes,
                                             "timeout": timeout_s, "slots": threading.Semaphore(concurrency)})

    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body, default=str).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)
        self.close_connection = True

    def _refused(self, endpoint: str) -> bool:
        """Answer 401/404 and return True unless the request is authorised and for `endpoint`."""
        if self.token and not hmac.compare_digest(self.headers.get("Authorization", "").encode(),
                                                  f"Bearer {self.token}".encode()):
            self._send(401, {"error": "missing or wrong bearer token"})
        elif self.path.rstrip("/").rpartition("/")[2] != endpoint:
            self._send(404, {"error": "GET /health or POST /score"})
        else:
            return False
        return True

    def do_GET(self) -> None:
        if not self._refused("health"):
            self._send(200, {"verifier": getattr(self.verifier, "name", "")})

    def do_POST(self) -> None:
        if self._refused("score"):
            return
        length = self.headers.get("Content-Length", "")
        if not length.isdigit() or int(length) > self.max_bytes:
            return self._send(413, {"error": f"a Content-Length of at most {self.max_bytes} bytes is needed"})
        try:
            body = json.loads(self.rfile.read(int(length)))
            with self.slots:
                reply = score_request(self.verifier, body)
        except ValueError as exc:          # bad JSON or out of schema: the client's fault
            return self._send(400, {"error": str(exc)[:500]})
        except Exception as exc:  # noqa: BLE001 - a verifier bug: 500, which the client retries
            return self._send(500, {"error": f"{type(exc).__name__}: {exc}"[:500]})
        self._send(200, reply)

    def log_message(self, format: str, *args: Any) -> None:   # requests are not logged
        return None


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rlvr.verifiers.serve", description=__doc__.split("\n")[0])
    ap.add_argument("verifier", help="a built-in verifier name (math, code, constraints, ...)")
    ap.add_argument("--options", default="{}", help="the verifier's keyword options as JSON")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8410)
    ap.add_argument("--token-env", default="", help="environment variable holding the bearer token")
    ap.add_argument("--max-mb", type=float, default=32.0)
    ap.add_argument("--timeout-s", type=float, default=60.0)
    ap.add_argument("--concurrency", type=int, default=4)
    a = ap.parse_args(argv)
    token = os.environ.get(a.token_env, "") if a.token_env else ""
    if a.token_env and not token:
        print(f"error: --token-env {a.token_env}: that variable is empty or unset", file=sys.stderr)
        return 2
    if not _loopback(a.host) and not token:
        print(f"error: --host {a.host} is not loopback: give --token-env", file=sys.stderr)
        return 2
    try:
        verifier = get_verifier(a.verifier, **json.loads(a.options))
    except (KeyError, TypeError, ValueError) as exc:
        print(f"error: {a.verifier} {a.options}: {exc}", file=sys.stderr)
        return 2
    server = ThreadingHTTPServer((a.host, a.port), Handler.bind(
        verifier, token, int(a.max_mb * 2**20), a.timeout_s, a.concurrency))
    server.daemon_threads = True
    print(f"listening on http://{a.host}:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        getattr(verifier, "close", lambda: None)()
    return 0


if __name__ == "__main__":
    sys.exit(main())
