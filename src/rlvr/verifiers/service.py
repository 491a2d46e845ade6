"""A reward service as a reward term: `{service: URL, ...}` in `data.reward_funcs`.

The step's completions go to `POST URL/score` in batches of `batch_size`, at most `concurrency`
requests at a time, each with `timeout_s`; a batch that fails on a connection error, a timeout, a
5xx or a 429 is sent again up to `retries` times (0.5 s, 1 s, 2 s ... apart). JSON only, both ways:

  request   {"responses": [str], "problems": [{"id", "prompt", "reference", "verifier", "metadata"}],
             "completion_ids": [[int]] | null}
  response  {"scores": [{"reward": float | null, "correct": bool, "flags": [str],
             "extracted": str | null, "details": {...}}]}     one per response, in order

`reward: null` means "not applicable", as a TRL reward function's None. `python -m
rlvr.verifiers.serve` serves any built-in verifier this way. With `token_env` set (default
RLVR_REWARD_TOKEN) and that variable non-empty, each request carries `Authorization: Bearer <it>`.

Failure is the `reward_crash` path of every reward term: a batch that still fails after its retries
(or answers out of schema) scores its rows 0 with the flag `timeout` or `crash`, the reason goes to
the run log's `reward_crash` event, `rewards/<term>/crash_rate` to the metrics, the doctor raises
`reward_crash`, and `run.strict_rewards=true` stops the run after that step. Not guaranteed: that
the service is the same between steps (a resumed run is exact only if its answers are).
"""

from __future__ import annotations

import http.client
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Mapping
from urllib.parse import SplitResult, urlsplit

from rlvr.types import Problem, Score

_RETRY_STATUS = {429, 500, 502, 503, 504}


class ServiceError(Exception):
    def __init__(self, message: str, flag: str = "crash", retry: bool = True):
        super().__init__(message)
        self.flag, self.retry = flag, retry


def problem_json(p: Problem) -> dict[str, Any]:
    return {"id": p.id, "prompt": p.prompt, "reference": p.reference, "verifier": p.verifier,
            "metadata": p.metadata}


def score_of(row: Any) -> Score | None:
    """A response row as a Score (None: not applicable); ServiceError when it breaks the schema."""
    if not isinstance(row, dict) or "reward" not in row:
        raise ServiceError(f"a score must be an object with 'reward'; got {str(row)[:80]}", retry=False)
    reward = row["reward"]
    if reward is None:
        return None
    if isinstance(reward, bool) or not isinstance(reward, (int, float)) or reward != reward:
        raise ServiceError(f"reward must be a number or null; got {reward!r}", retry=False)
    flags = row.get("flags") or []
    return Score(float(reward), bool(row.get("correct", reward > 0)), tuple(str(f) for f in flags),
                 row.get("extracted"), row.get("details") if isinstance(row.get("details"), dict) else None)


class ServiceTerm:
    """One `{service: URL}` term; `rewards` has the contract of the other terms (reward_funcs.py)."""

    verifier = None

    def __init__(self, term: Mapping[str, Any]):
        self.url = str(term["service"])
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"service {self.url!r}: expected http://host:port[/path]")
        self.parts = parts
        self.name = term.get("name") or f"service_{parts.hostname}_{parts.port or ''}".rstrip("_")
        self.timeout_s = float(term.get("timeout_s", 30.0))
        self.batch_size = int(term.get("batch_size", 64))
        self.concurrency = int(term.get("concurrency", 4))
        self.retries = int(term.get("retries", 2))
        self.token = os.environ.get(str(term.get("token_env", "RLVR_REWARD_TOKEN")), "")

    def check(self, where: str) -> None:
        try:
            self._request("GET", "health", None)
        except ServiceError as exc:
            raise ValueError(f"{where}.service: {self.url} does not answer: {exc}") from None

    def rewards(self, responses, problems, token_ids):
        n = len(responses)
        bounds = [(a, min(n, a + self.batch_size)) for a in range(0, n, self.batch_size)]

        def one(ab: tuple[int, int]):
            a, b = ab
            body = {"responses": list(responses[a:b]), "problems": [problem_json(p) for p in problems[a:b]],
                    "completion_ids": None if token_ids is None else [list(t) for t in token_ids[a:b]]}
            return self._batch(body, b - a)

        with ThreadPoolExecutor(max(1, min(self.concurrency, len(bounds)))) as ex:
            parts = list(ex.map(one, bounds))
        return join_rows(parts)

    def _batch(self, body: dict[str, Any], n: int):
        try:
            reply = self._with_retries(body)
            scores = reply.get("scores") if isinstance(reply, dict) else None
            if not isinstance(scores, list) or len(scores) != n:
                raise ServiceError(f"expected {{'scores': [...]}} with {n} rows; got "
                                   f"{str(reply)[:120]}", retry=False)
            return [score_of(s) for s in scores], [()] * n, {}
        except ServiceError as exc:
            error = {"error": f"{self.url}: {exc}"[:500], "traceback": "", "flag": exc.flag}
            return [0.0] * n, [(exc.flag,)] * n, error

    def _with_retries(self, body: dict[str, Any]) -> Any:
        data = json.dumps(body, default=str).encode()
        return with_retries(lambda: self._request("POST", "score", data), self.retries)

    def _request(self, method: str, endpoint: str, data: bytes | None) -> Any:
        path = f"{self.parts.path.rstrip('/')}/{endpoint}"
        return request_json(self.parts, method, path, data, self.timeout_s, self.token)


Rows = tuple[list[Any], list[tuple[str, ...]], dict]   # rewards, flags per row, the first error


def join_rows(parts: list[Rows]) -> Rows:
    """The (rows, flags per row, error) of consecutive calls as one: rows in order, the first error."""
    rows: list[Any] = []
    flags: list[tuple[str, ...]] = []
    for r, f, _ in parts:
        rows += r
        flags += f
    return rows, flags, next((e for _, _, e in parts if e), {})


def with_retries(call, retries: int) -> Any:
    """`call()`, again up to `retries` times (0.5 s, 1 s, 2 s ... apart) while it raises a
    ServiceError that may pass (connection, timeout, 5xx, 429)."""
    for attempt in range(retries + 1):
        try:
            return call()
        except ServiceError as exc:
            if not exc.retry or attempt == retries:
                raise
            time.sleep(0.5 * 2 ** attempt)
    raise AssertionError("unreachable")


def request_json(parts: SplitResult, method: str, path: str, data: bytes | None, timeout_s: float,
                 token: str = "") -> Any:
    """One HTTP request with JSON both ways (no redirects, no proxies); ServiceError on failure."""
    conn_type = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = conn_type(parts.hostname or "", parts.port, timeout=timeout_s)
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        conn.request(method, path, body=data, headers=headers)
        resp = conn.getresponse()
        payload = resp.read()
    except TimeoutError:
        raise ServiceError(f"no answer within timeout_s={timeout_s:g} s", "timeout") from None
    except OSError as exc:   # refused, reset, unreachable
        raise ServiceError(f"{type(exc).__name__}: {exc}") from None
    finally:
        conn.close()
    if resp.status != 200:
        raise ServiceError(f"HTTP {resp.status}: {payload[:200].decode(errors='replace')}",
                           retry=resp.status in _RETRY_STATUS)
    try:
        return json.loads(payload)
    except ValueError:
        raise ServiceError(f"not JSON: {payload[:120]!r}", retry=False) from None
