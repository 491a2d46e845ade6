"""`python -m rlvr.rollout.vllm.server`: one vLLM engine in a process of its own, served on a socket.

Run by `rollout.engine: vllm_server` (`vllm_servers.VLLMServerEngine` starts one per server, with
the interpreter of `rollout.vllm_python`, so the trainer's environment need not hold vLLM), or by
hand for `rollout.vllm_urls`. It holds `vllm.LLM` in-process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`)
with the `vllm_worker.WeightSync` extension, listens on --host/--port (default 127.0.0.1; port 0:
any free port) and speaks `vllm.wire`: clients prove the key in the environment variable
RLVR_VLLM_AUTHKEY (hex) within a deadline, every frame is authenticated JSON (never a pickle).
A peer that connects and says nothing, closes mid-handshake, sends garbage or leaves before its
reply costs only its own connection; the server keeps serving. Across hosts: an SSH tunnel
(see `vllm.wire`); the frames are authenticated, not encrypted. Once it listens it prints
`READY` and JSON {"port": ..., "pid": ...} on a line of stdout.
With --exit-with-parent (the engine's servers) it exits within a second of its parent's death,
kill -9 included, first removing --remove-when-orphaned DIR (the engine's weight files in shared
memory, which a killed trainer cannot remove).

Requests are dicts, one client at a time, each answered with a dict ("error": the server's
traceback, when one fails; the server keeps serving):
- {"op": "load", "path": P, "version": v}: load the safetensors file P (`rlvr_load_file`), reset the
  prefix cache, take `v` as the policy version; answers the tensor count and their `state_hash`.
- {"op": "nccl_init", "host", "port", "rank", "world"}: join the trainer's NCCL group as `rank`;
  {"op": "nccl_load", "meta": [(name, dtype, shape)], "version": v}: receive those tensors by
  broadcast from rank 0 and load them, answering as "load" (`vllm_transport.NcclTransport`:
  written for GPUs, unverified).
- {"op": "generate", "prompts": [[ids]], "seeds": [...], "n", "temperature", "top_p", "top_k",
  "more" (min_p, repetition_penalty, stop, include_stop_str_in_output, extra keywords),
  "max_tokens", "allowed"}: one request per prompt with its own seed; answers "outputs", per prompt
  n (token ids, behaviour log-probs, finish reason, text), and "version", the version of the
  weights that sampled them, which the client checks (a stale server is never used silently).
- {"op": "score", "ids": [...], "start": k}: temperature-1 log-probs of ids[k:] (the canary);
  {"op": "score", "seqs": [[ids]], "starts": [k]}: the same for each sequence, in one batch (a
  distillation teacher, `training.teacher.ServerTeacher`).
- {"op": "tokenizer"}: the served model's vocabulary and special ids (the teacher's check).
- {"op": "ping"}: version and pid; {"op": "stop"}: answers, then the process exits.
Behaviour log-probs are vLLM's `processed_logprobs`, as in the in-process engine (`rollout.vllm`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback

READY = "rlvr-vllm-server ready "   # then JSON; vLLM's own log lines go to stdout as well


def _serve(llm, conn, state: dict) -> bool:
    """Answer the requests on `conn` until it closes or fails (False) or a stop request (True)."""
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError, ValueError):   # gone, cut, or a frame that is not ours
            return False
        op = request.get("op") if isinstance(request, dict) else None
        try:
            reply = _OPS[op](llm, request, state) if op in _OPS else {"error": f"unknown op {op!r}"}
        except Exception:  # the client gets the traceback; the server keeps its engine
            reply = {"error": traceback.format_exc()}
        try:
            conn.send(reply)
        except (OSError, ValueError):              # the client left before its reply
            return False
        if op == "stop":
            return True


def _load(llm, request: dict, state: dict) -> dict:
    ((count, digest),) = llm.collective_rpc("rlvr_load_file", args=(request["path"],))
    llm.reset_prefix_cache()
    state["version"] = int(request["version"])
    return {"version": state["version"], "tensors": count, "hash": digest}


def _nccl_init(llm, request: dict, state: dict) -> dict:
    llm.collective_rpc("rlvr_nccl_init", args=(request["host"], request["port"], request["rank"],
                                               request["world"]))
    return {"version": state["version"]}


def _nccl_load(llm, request: dict, state: dict) -> dict:
    ((count, digest),) = llm.collective_rpc("rlvr_nccl_load", args=(request["meta"],))
    llm.reset_prefix_cache()
    state["version"] = int(request["version"])
    return {"version": state["version"], "tensors": count, "hash": digest}


def _generate(llm, request: dict, state: dict) -> dict:
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    sampling = [SamplingParams(n=request["n"], temperature=request["temperature"], top_p=request["top_p"],
                               top_k=request["top_k"], logprobs=0, max_tokens=request["max_tokens"],
                               seed=seed, allowed_token_ids=request["allowed"],
                               **request.get("more", {}))
                for seed in request["seeds"]]
    outs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in request["prompts"]], sampling,
                        use_tqdm=False)
    outputs = [[_sample(c) for c in out.outputs] for out in outs]
    return {"version": state["version"], "outputs": outputs}


def _sample(c) -> tuple[list[int], list[float], str, str]:
    ids = list(c.token_ids)
    logprobs = [float(step[t].logprob) for t, step in zip(ids, c.logprobs or [])]
    return ids, logprobs, "length" if c.finish_reason == "length" else "stop", c.text


def _score(llm, request: dict, state: dict) -> dict:
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    one = "seqs" not in request
    seqs, starts = ([request["ids"]], [request["start"]]) if one else (request["seqs"], request["starts"])
    outs = llm.generate([TokensPrompt(prompt_token_ids=ids) for ids in seqs],
                        SamplingParams(max_tokens=1, prompt_logprobs=0, temperature=1.0), use_tqdm=False)
    scored = [[float(out.prompt_logprobs[i][ids[i]].logprob) for i in range(start, len(ids))]
              for out, ids, start in zip(outs, seqs, starts)]
    return {"version": state["version"], "logprobs": scored[0] if one else scored}


def _tokenizer(llm, request: dict, state: dict) -> dict:
    tok = llm.get_tokenizer()
    return {"version": state["version"], "vocab": tok.get_vocab(),
            **{name: getattr(tok, name, None)
               for name in ("bos_token_id", "eos_token_id", "pad_token_id", "unk_token_id")}}


def _ping(llm, request: dict, state: dict) -> dict:
    return {"version": state["version"], "pid": os.getpid()}


_OPS = {"load": _load, "nccl_init": _nccl_init, "nccl_load": _nccl_load, "generate": _generate,
        "score": _score, "tokenizer": _tokenizer, "ping": _ping, "stop": _ping}


def _watch_parent(parent: int, remove: str = "") -> None:
    """Exit as soon as `parent` is no longer this process's parent (it died; we were re-parented),
    removing the directory `remove` first when one is given."""
    import shutil
    import threading
    import time

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        if remove:   # every server of the trainer may try: whichever runs first removes it
            shutil.rmtree(remove, ignore_errors=True)
        os._exit(3)

    threading.Thread(target=watch, daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    import queue
    import socket
    import threading

    import torch

    from rlvr.rollout.vllm import wire as vllm_wire
    from rlvr.rollout.vllm.engine import engine_env

    ap = argparse.ArgumentParser(prog="python -m rlvr.rollout.vllm.server")
    ap.add_argument("--model", required=True, help="a Hugging Face checkpoint directory")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--options", default="{}", help="JSON: keyword arguments to vllm.LLM")
    ap.add_argument("--exit-with-parent", action="store_true",
                    help="exit when the process that started this one is gone (a trainer killed with -9)")
    ap.add_argument("--remove-when-orphaned", default="", metavar="DIR",
                    help="with --exit-with-parent: remove DIR (the trainer's weight files in shared "
                         "memory, which a trainer killed with -9 leaves behind) before exiting")
    args = ap.parse_args(argv)
    if args.exit_with_parent:
        _watch_parent(os.getppid(), args.remove_when_orphaned)
    key = os.environ.get("RLVR_VLLM_AUTHKEY", "")
    if not key:
        print("RLVR_VLLM_AUTHKEY is not set (hex bytes that clients must present)", file=sys.stderr)
        return 2
    for name, value in engine_env(torch.cuda.is_available()).items():
        os.environ.setdefault(name, value)
    from vllm import LLM

    kwargs = {"enforce_eager": True, "seed": 0, "logprobs_mode": "processed_logprobs",
              "worker_extension_cls": "rlvr.rollout.vllm.worker.WeightSync", **json.loads(args.options)}
    llm = LLM(model=args.model, **kwargs)
    listener = socket.create_server((args.host, args.port), backlog=64)
    channels: queue.Queue = queue.Queue()
    threading.Thread(target=vllm_wire.serve_channels, args=(listener, bytes.fromhex(key), channels.put),
                     daemon=True).start()
    print(READY + json.dumps({"port": listener.getsockname()[1], "pid": os.getpid()}), flush=True)
    state = {"version": 0}
    while True:           # one authenticated client at a time, in the order they proved the key
        with channels.get() as conn:
            if _serve(llm, conn, state):
                return 0


if __name__ == "__main__":
    sys.exit(main())
