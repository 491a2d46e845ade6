"""Environments written for the `verifiers` package run in rlvr unchanged, sampled by rlvr's engine.

The classic verifiers API (`vf.SingleTurnEnv`, `vf.MultiTurnEnv` and their `vf.Rubric`; tested with
verifiers 0.3.1, where `import verifiers as vf` still exposes it: 0.4 keeps only its new
`verifiers.v1` stack) rolls out by calling a model through an OpenAI client. `OpenAIServer` is
rlvr's engine behind that interface: a real local HTTP server (stdlib `ThreadingHTTPServer`,
127.0.0.1 only, a bearer token per server, socket timeouts, bodies up to 16 MiB) answering
`POST /v1/chat/completions`, which the environment reaches through verifiers' own stock
`OpenAIChatCompletionsClient` and the real `openai` SDK. An HTTP server rather than an
in-process client object because then nothing of the environment's path is replaced: its client,
message normalisation, error handling and stop conditions run exactly as against vLLM.

Every request carries the rollout's `trajectory_id` (verifiers' `extra_headers_from_state`), and the
server records each call under it: prompt ids, sampled ids, behaviour log-probs, finish reason. A
rollout's first call encodes its messages as `PromptEncoder` does (chat template when the tokenizer
has one, else `role: content` lines ending in `assistant:`). A later call must extend the previous
call's messages by the assistant message the server returned plus new environment messages; its
prefix is the previous prefix + the sampled ids, unchanged, + the environment messages encoded once
(`_bridge`). So rlvr never re-tokenises the joined conversation; a call that rewrites history is
refused with HTTP 400 (verifiers then ends that rollout with an error).

`VerifiersRollouts.generate` runs `env.run_group` for each problem and returns rlvr `Group`s:
`token_ids` = everything after the first prompt (sampled ids and environment ids in order),
`loss_mask` 1 exactly on sampled ids, `logprobs` the engine's behaviour log-probs there and 0.0 on
environment ids, `score.reward` the environment rubric's own reward (`details` its metrics;
`correct` is reward > 0, a rubric having no notion of correct), `finish_reason` one of stop / length
(last turn hit its token cap or the context) / turns / env (an environment stop condition) / error
(verifiers recorded an error; flag `vf_error`).

Guaranteed: the same groups for the same seed and weights, whatever order the concurrent rollouts'
requests arrive in. Each request draws from a generator of its own, seeded from the `generate`
call's seed, its prompt ids and parameters, and how many earlier requests of the call had those
(requests with one prefix are exchangeable, so which of them gets which draw does not change what
is drawn), and decodes alone (a batch's draws and numerics would depend on which requests share
it); a group's completions are ordered by their token ids. Not guaranteed: tool-calling envs
(`vf.ToolEnv`: the server returns no `tool_calls`); byte-identity of the bridge with a template's
rendering of the whole conversation (the tokens trained are the tokens used).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import os
import queue
import secrets
import threading
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Container, Sequence

import torch

from rlvr.models.device import seed_for
from rlvr.rollout.base import PromptEncoder, SamplingParams, stamp
from rlvr.types import Completion, Group, Problem, Score

TRAJECTORY_HEADER = "X-Rlvr-Trajectory"
SOCKET_TIMEOUT_S = 60.0
MAX_BODY = 16 << 20


@dataclass
class Call:
    prompt_ids: list[int]
    bridge: int                  # how many of prompt_ids' last ids are new environment ids
    ids: list[int]
    logprobs: list[float]
    finish: str                  # "stop" | "length"
    messages: list[dict]         # the request's messages as (role, content) dicts
    content: str                 # the text returned for `ids`


@dataclass
class _Job:
    prefix: list[int]
    params: SamplingParams
    gen: torch.Generator
    done: threading.Event = field(default_factory=threading.Event)
    row: tuple | None = None


class BadRequest(Exception):
    pass


class _HTTPServer(ThreadingHTTPServer):
    # The rollouts of a step connect at once; the default backlog of 5 resets the rest.
    request_queue_size = 1024
    daemon_threads = True


def _plain(messages: list[dict]) -> str:
    return "\n".join(f"{m['role']}: {m['content']}" for m in messages)


def _text(content: Any) -> str:
    if isinstance(content, list):       # OpenAI content parts: only text is supported
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


class OpenAIServer:
    """rlvr's engine (`continue_ids`) as an OpenAI chat-completions endpoint, with per-call records.
    Each request decodes alone, from a generator of its own (see the module docstring)."""

    def __init__(self, engine, tokenizer, max_new_tokens: int = 64):
        self.engine, self.tokenizer = engine, tokenizer
        self.prompts = PromptEncoder(tokenizer)   # messages, so `template_text` does not apply
        self.max_new_tokens = max_new_tokens
        self.context = int(getattr(engine.model.config, "max_position_embeddings", 1 << 30))
        self.calls: dict[str, list[Call]] = {}
        self.seed = 0                        # the generate call's
        self._seen: dict[str, int] = {}      # its requests so far, per (prefix, params)
        self._lock = threading.Lock()
        self._jobs: queue.Queue = queue.Queue()
        self.token = secrets.token_urlsafe(32)    # any local process can reach the port
        self._http = _HTTPServer(("127.0.0.1", 0), _handler(self))
        self._threads = [threading.Thread(target=self._http.serve_forever, daemon=True),
                         threading.Thread(target=self._decode_loop, daemon=True)]
        for t in self._threads:
            t.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}/v1"

    @property
    def key_var(self) -> str:
        """The environment variable holding the token (verifiers' client reads the key from one)."""
        name = f"RLVR_VF_TOKEN_{self._http.server_address[1]}"
        os.environ[name] = self.token
        return name

    def close(self) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._jobs.put(None)

    def reset(self, seed: int) -> None:
        """Forget past calls; later requests draw from `seed` (start of a `generate` call)."""
        with self._lock:
            self.calls.clear()
            self._seen.clear()
            self.seed = seed

    def _generator(self, prefix: list[int], params: SamplingParams) -> torch.Generator:
        """A request's own generator: (the call's seed, its prefix and parameters, how many earlier
        requests of this call had both), so arrival order cannot change the draws."""
        key = hashlib.sha256(repr((prefix, params)).encode()).hexdigest()
        with self._lock:
            k = self._seen[key] = self._seen.get(key, -1) + 1
            seed = self.seed
        return torch.Generator().manual_seed(seed_for(seed, k, f"vf/{key}"))

    # ---- one request -----------------------------------------------------------------------------

    def complete(self, body: dict, trajectory: str | None) -> dict:
        """An OpenAI chat.completion for `body`; raises BadRequest on what it cannot serve."""
        if not trajectory:
            raise BadRequest(f"missing {TRAJECTORY_HEADER} header")
        if body.get("tools"):
            raise BadRequest("tool calling is not supported by this server")
        if int(body.get("n", 1)) != 1:
            raise BadRequest("n must be 1")
        messages = [{"role": m["role"], "content": _text(m.get("content"))} for m in body["messages"]]
        with self._lock:
            history = self.calls.get(trajectory, [])
        prefix, bridge = self._prefix(messages, history[-1] if history else None)
        cap = int(body.get("max_completion_tokens") or body.get("max_tokens") or self.max_new_tokens)
        cap = min(cap, self.max_new_tokens, self.context - len(prefix))
        if cap <= 0:
            raise BadRequest(f"prompt_too_long: {len(prefix)} tokens, context length {self.context}")
        temperature = float(body.get("temperature", 1.0))      # 0: greedy, as in OpenAI's API
        params = SamplingParams(temperature if temperature > 0 else 1.0,
                                float(body.get("top_p", 1.0)), cap, greedy=temperature == 0)
        ids, logps, finish = self._sample(prefix, params)
        content = self.tokenizer.decode(ids[:-1] if finish == "stop" else ids,
                                        skip_special_tokens=True)
        with self._lock:
            self.calls.setdefault(trajectory, []).append(
                Call(prefix, bridge, ids, logps, finish, messages, content))
        return {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": 0,
                "model": body.get("model", "rlvr"),
                "choices": [{"index": 0, "finish_reason": finish, "logprobs": None,
                             "message": {"role": "assistant", "content": content}}],
                "usage": {"prompt_tokens": len(prefix), "completion_tokens": len(ids),
                          "total_tokens": len(prefix) + len(ids)}}

    def _prefix(self, messages: list[dict], last: Call | None) -> tuple[list[int], int]:
        """Prompt ids for a call: the first call's messages encoded; a later call's = the last
        call's prefix and sampled ids unchanged + its new environment messages encoded once."""
        if last is None:
            return self.prompts.encode(Problem("vf", messages)), 0
        said = {"role": "assistant", "content": last.content}
        n = len(last.messages)
        if messages[:n + 1] != last.messages + [said] or len(messages) == n + 1:
            raise BadRequest("messages do not extend this trajectory's last call (history rewritten)")
        new = self._bridge(messages[n + 1:], last)
        return last.prompt_ids + last.ids + new, len(new)

    def _bridge(self, env_messages: list[dict], last: Call) -> list[int]:
        tok = self.tokenizer
        if not getattr(tok, "chat_template", None):
            text = "\n" + _plain(env_messages) + "\nassistant:"
            return list(tok(text, add_special_tokens=False)["input_ids"])
        # The template's rendering of a stand-in assistant turn, with and without the environment
        # messages after it: the difference, from just after the end-of-turn id, is the bridge.
        dummy = [{"role": "assistant", "content": "x"}]
        full = _ids(tok.apply_chat_template(dummy + env_messages, add_generation_prompt=True))
        base = _ids(tok.apply_chat_template(dummy, add_generation_prompt=False))
        if full[:len(base)] != base:
            raise BadRequest("chat template cannot be split after an assistant turn")
        end = last.ids[-1] if last.finish == "stop" else None
        cut = max((i + 1 for i, t in enumerate(base) if t == end), default=len(base))
        return full[cut:]

    # ---- the engine ------------------------------------------------------------------------------

    def _sample(self, prefix: list[int], params: SamplingParams) -> tuple[list[int], list[float], str]:
        job = _Job(prefix, params, self._generator(prefix, params))
        self._jobs.put(job)
        job.done.wait()
        if isinstance(job.row, BaseException):
            raise job.row
        assert job.row is not None   # the worker sets row before done
        tokens, logps, reason = job.row
        return list(tokens), [float(x) for x in logps], reason

    def _decode_loop(self) -> None:
        """One engine thread, one request at a time (see the module docstring for why not batches)."""
        while (job := self._jobs.get()) is not None:
            try:
                job.row = self.engine.continue_ids([job.prefix], job.params, job.gen)[0]
            except Exception as e:          # this request fails; the server keeps serving
                job.row = e
            job.done.set()


def _ids(x) -> list[int]:
    return list(x["input_ids"] if hasattr(x, "keys") else x)


def _handler(server: OpenAIServer):
    class Handler(BaseHTTPRequestHandler):
        timeout = SOCKET_TIMEOUT_S       # a peer that connects and says nothing holds one thread, briefly

        def do_POST(self):
            given = self.headers.get("Authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {server.token}".encode()):
                return self._send(401, {"error": {"message": "a bearer token is required",
                                                  "type": "invalid_request_error"}})
            size = int(self.headers.get("Content-Length", 0) or 0)
            if not 0 <= size <= MAX_BODY:
                return self._send(413, {"error": {"message": f"body over {MAX_BODY} bytes"}})
            if not self.path.rstrip("/").endswith("/chat/completions"):
                return self._send(404, {"error": {"message": f"no route {self.path}"}})
            try:
                body = json.loads(self.rfile.read(size))
                out = server.complete(body, self.headers.get(TRAJECTORY_HEADER))
            except (BadRequest, KeyError, TypeError, ValueError) as e:
                return self._send(400, {"error": {"message": str(e), "type": "invalid_request_error"}})
            except Exception as e:              # the engine failed: the client sees why
                return self._send(500, {"error": {"message": repr(e), "type": "server_error"}})
            self._send(200, out)

        def _send(self, status: int, obj: dict) -> None:
            data = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):      # quiet: one line per request is noise in training logs
            pass
    return Handler


# ---- environment rollouts → rlvr groups ------------------------------------------------------------

def problems_from_env(env, n: int = -1, eval_split: bool = False) -> list[Problem]:
    """The environment's (formatted) dataset rows as Problems; the row travels in metadata."""
    rows = env.get_eval_dataset(n) if eval_split else env.get_dataset(n)
    return [Problem(f"vf/{r['example_id']}", r["prompt"], r.get("answer"), "verifiers",
                    {"vf_input": dict(r)}) for r in rows]


class VerifiersRollouts:
    """`generate(problems, n, params, seed) -> list[Group]` (the `RolloutEngine` signature) over a
    verifiers environment: its rollout loop and rubric, rlvr's engine and tokens. Not an engine
    itself: `vftask.VerifiersEngine` puts it behind the protocol, beside the engine it samples."""

    def __init__(self, env, engine, tokenizer, max_new_tokens: int = 64, model: str = "rlvr"):
        from verifiers.types import ClientConfig

        self.env, self.engine, self.tokenizer, self.model = env, engine, tokenizer, model
        self.terms = _reward_terms(env.rubric)
        self.server = OpenAIServer(engine, tokenizer, max_new_tokens)
        # max_retries=0: a retried request would be sampled (and recorded) twice.
        self.client = ClientConfig(api_base_url=self.server.base_url, api_key_var=self.server.key_var,
                                   max_retries=0, extra_headers_from_state={
                                       TRAJECTORY_HEADER: "trajectory_id"})

    def close(self) -> None:
        self.server.close()

    def generate(self, problems: Sequence[Problem], n: int, params: SamplingParams,
                 seed: int) -> list[Group]:
        self.server.reset(seed)
        sampling = {"temperature": 0.0 if params.greedy else params.temperature,
                    "top_p": params.top_p, "max_tokens": params.max_new_tokens}
        outputs = asyncio.run(self._run(problems, n, sampling))
        groups = [self._group(p, outs) for p, outs in zip(problems, outputs)]
        stamp(groups, self.engine.version, seed)
        return groups

    async def _run(self, problems, n, sampling):
        return await asyncio.gather(*(
            self.env.run_group([p.metadata["vf_input"]] * n, self.client, self.model, sampling,
                               state_columns=["trajectory_id"]) for p in problems))

    def _group(self, problem: Problem, outputs: list[dict]) -> Group:
        episodes = [self._completion(o) for o in outputs]
        prompts = {tuple(prompt) for prompt, _ in episodes}
        if len(prompts) != 1:
            raise RuntimeError(f"{problem.id}: rollouts of one group started from different prompts")
        # rollouts of one problem are exchangeable: which input got which draws is arrival order
        completions = sorted((c for _, c in episodes), key=lambda c: (c.token_ids, c.logprobs))
        return Group(problem, list(prompts.pop()), completions)

    def _completion(self, out: dict) -> tuple[list[int], Completion]:
        calls = self.server.calls.get(out["trajectory_id"])
        if not calls:
            raise RuntimeError(f"rollout {out['trajectory_id']} made no model call "
                               f"(verifiers error: {out.get('error')})")
        prompt = calls[0].prompt_ids
        ids, mask, logps = [], [], []
        for c in calls:
            env_ids = c.prompt_ids[len(c.prompt_ids) - c.bridge:] if c.bridge else []
            ids += env_ids + c.ids
            mask += [0] * len(env_ids) + [1] * len(c.ids)
            logps += [0.0] * len(env_ids) + c.logprobs
        assert calls[-1].prompt_ids + calls[-1].ids == prompt + ids   # stitched, never re-encoded
        error = out.get("error")
        flags = ("vf_error",) if error else ()
        metrics, reward = out.get("metrics") or {}, float(out.get("reward") or 0.0)
        # "terms": the rubric's weighted functions as a combined verifier's terms (the metric
        # rewards/<name>/mean); weight-0 monitors (MultiTurnEnv's num_turns) stay in "metrics"
        score = Score(reward, reward > 0, flags,
                      details={"metrics": out.get("metrics"), "stop_condition": out.get("stop_condition"),
                               "error": error,
                               "terms": {k: v for k, v in metrics.items() if k in self.terms}})
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        return prompt, Completion(text, ids, logps, _finish(out, calls, self.env), score, mask,
                                  len(calls))


def _reward_terms(rubric) -> Container[str]:
    """Names of the rubric's functions with a non-zero weight (private helpers of verifiers'
    classic Rubric and RubricGroup; without them every metric counts as a term)."""
    try:
        names, weights = rubric._get_reward_func_names(), rubric._get_reward_weights()
    except AttributeError:
        return _Everything()
    return {n for n, w in zip(names, weights) if w != 0}


class _Everything:
    def __contains__(self, item) -> bool:
        return True


def _finish(out: dict, calls: list[Call], env) -> str:
    stop = out.get("stop_condition")
    if out.get("error") or stop == "has_error":
        return "error"
    if calls[-1].finish == "length" or stop == "prompt_too_long":
        return "length"
    if stop == "max_turns_reached":
        return "stop" if getattr(env, "max_turns", 0) == 1 else "turns"
    return "env"
