"""Starting vLLM servers (`rlvr.rollout.vllm.server`) as local processes, for `vllm_servers`.

`server_python` picks the interpreter (`rollout.vllm_python`, else this one when it has vLLM, else
the project's `.venv-vllm`); `server_env` gives a server this environment minus torchrun's
variables (a server is no rank of the trainer's job), with the trainer's rlvr first on the path;
on a machine with GPUs `server_gpus` gives each local server a GPU of its own
(`CUDA_VISIBLE_DEVICES`), after the trainer's ranks' (ranks use GPUs 0 … LOCAL_WORLD_SIZE − 1 of
the visible ones), or refuses when there are fewer GPUs than trainer ranks plus servers.
`LocalLauncher` is the launcher protocol the engine uses: `spawn` (the process starts loading),
`ready` (where it listens, or its stderr when it exits first), `kill`, `stop`, `pid`; a launcher
placing servers elsewhere (Ray) offers the same members.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from rlvr.errors import ConfigError

# torchrun's variables: a server is no rank of the trainer's job (vLLM reads RANK / LOCAL_RANK)
_RANK_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK",
              "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID")


def server_python(configured: str = "", key: str = "rollout.vllm_python",
                  roots: tuple[Path, ...] | None = None) -> str:
    """The server's interpreter: `configured`, else this one when it has vLLM, else the project's
    `.venv-vllm` under one of `roots` (default: beside the source tree, the working directory)."""
    import importlib.util

    if configured:
        if not Path(configured).exists():
            raise ConfigError(f"{key}: {configured!r} does not exist")
        return configured
    if importlib.util.find_spec("vllm") is not None:
        return sys.executable
    for root in roots if roots is not None else (Path(__file__).resolve().parents[4], Path.cwd()):
        candidate = root / ".venv-vllm" / "bin" / "python"
        if candidate.exists():
            return str(candidate)
    raise ConfigError(f"{key}: no interpreter with vLLM: this one lacks it and no "
                      f".venv-vllm was found (make venv-vllm, or set {key})")


def server_env(key: str, on_gpu: bool = False) -> dict[str, str]:
    """The server's environment: this one without torchrun's variables, rlvr's own source first
    on the path (the server runs the trainer's rlvr), the key; on a CPU one thread per op and
    the CPU engine's bounds (`vllm.engine_env`)."""
    from rlvr.rollout.vllm.engine import engine_env

    env = {k: v for k, v in os.environ.items() if k not in _RANK_VARS}
    src = str(Path(__file__).resolve().parents[3])
    env["PYTHONPATH"] = os.pathsep.join([src] + [p for p in [env.get("PYTHONPATH", "")] if p])
    if not on_gpu:
        env["OMP_NUM_THREADS"] = "1"   # one thread per server: N servers share the cores, not N² threads
    env["RLVR_VLLM_AUTHKEY"] = key
    return {**engine_env(on_gpu), **env}


def visible_gpus() -> list[str]:
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES names them ([] without CUDA)."""
    import torch

    if not torch.cuda.is_available():
        return []
    named = os.environ.get("CUDA_VISIBLE_DEVICES")
    if named is not None:
        return [g.strip() for g in named.split(",") if g.strip()]
    return [str(i) for i in range(torch.cuda.device_count())]


def server_gpus(servers: int, visible: list[str] | None = None,
                trainer: int | None = None) -> list[str] | None:
    """CUDA_VISIBLE_DEVICES of each of `servers` local servers: the visible GPUs after the
    trainer's `trainer` ranks' (LOCAL_WORLD_SIZE, 1 outside torchrun), one each; None without
    GPUs (servers on the CPU). Fewer GPUs than ranks + servers: a ConfigError naming the counts
    (vLLM's free-memory check would fail on a shared card, and NCCL weight sync cannot put two
    ranks on one GPU)."""
    visible = visible_gpus() if visible is None else visible
    if not visible:
        return None
    trainer = int(os.environ.get("LOCAL_WORLD_SIZE", "1")) if trainer is None else trainer
    if len(visible) < trainer + servers:
        raise ConfigError(
            f"rollout.vllm_servers: {servers} local server(s) need a GPU each beside the trainer's "
            f"{trainer} rank(s): {trainer + servers} GPUs, but {len(visible)} visible "
            f"({','.join(visible)}); run fewer servers or ranks, or give rollout.vllm_urls")
    return visible[trainer:trainer + servers]


class LocalLauncher:
    """Starts servers as child processes of this one; `start` returns (host, port, handle).

    Each server exits when this process is gone (`--exit-with-parent`), and with `owns_files` (the
    engine's launcher, whose model directory lies in a temporary directory of its own) removes the
    directory holding the model directory first: a trainer killed with -9 leaves neither a server
    nor its weight files in shared memory behind."""

    def __init__(self, python: str, key: str, host: str = "127.0.0.1", owns_files: bool = False,
                 gpus: list[str] | None = None):
        self.python, self.key, self.host = python, bytes.fromhex(key), host
        self.env = server_env(key, on_gpu=gpus is not None)
        self.owns_files, self.gpus = owns_files, gpus
        self.held: dict[int, str] = {}   # pid -> the GPU its server holds

    def spawn(self, model_dir: str, options: dict):
        """Start a server process (it loads its model meanwhile); `ready` waits for it."""
        import subprocess

        cmd = [self.python, "-m", "rlvr.rollout.vllm.server", "--model", model_dir,
               "--host", self.host, "--options", json.dumps(options), "--exit-with-parent"]
        if self.owns_files:
            cmd += ["--remove-when-orphaned", os.path.dirname(os.path.abspath(model_dir))]
        gpu = self.free_gpu()
        env = self.env if gpu is None else {**self.env, "CUDA_VISIBLE_DEVICES": gpu}
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)
        if gpu is not None:
            self.held[proc.pid] = gpu
        return proc

    def free_gpu(self) -> str | None:
        """A GPU no live server of this launcher holds (None: servers on the CPU); a restarted
        server gets the one its predecessor left (`kill` frees it)."""
        if self.gpus is None:
            return None
        free = [g for g in self.gpus if g not in self.held.values()]
        if not free:
            raise RuntimeError(f"every GPU for local vLLM servers ({','.join(self.gpus)}) is taken")
        return free[0]

    def ready(self, proc) -> tuple[str, int]:
        """Where the spawned server listens, once it does (an error with its stderr if it exits)."""
        try:
            ready = _ready_line(proc)
        except BaseException:
            self.kill(proc)
            raise
        if ready is None:
            err = proc.stderr.read()[-3000:] if proc.stderr else ""
            proc.wait()
            raise RuntimeError(f"vLLM server ({' '.join(proc.args[:3])}) exited with {proc.returncode} "
                               f"before it listened:\n{err}")
        _drain(proc.stdout)
        _drain(proc.stderr)
        return self.host, int(ready["port"])

    def pid(self, handle) -> int:
        return handle.pid

    def kill(self, handle) -> None:
        if handle.poll() is None:
            handle.kill()
        handle.wait()
        self.held.pop(handle.pid, None)

    def stop(self, handle) -> None:
        import subprocess

        try:
            handle.wait(timeout=30)
        except subprocess.TimeoutExpired:
            handle.kill()
            handle.wait()
        self.held.pop(handle.pid, None)


def _ready_line(proc) -> dict | None:
    """The server's ready line (vLLM logs to stdout too), or None when it exits first."""
    from rlvr.rollout.vllm.server import READY

    for line in proc.stdout:
        if line.startswith(READY):
            return json.loads(line[len(READY):])
    return None


def _drain(stream) -> None:
    """Read a child's stderr in the background, so a chatty server never blocks on a full pipe."""
    import threading

    if stream is not None:
        threading.Thread(target=lambda: [None for _ in stream], daemon=True).start()


def check_launch(cfg) -> None:
    """`rollout.engine: vllm_server`'s check when a run opens: an interpreter with vLLM for servers
    it starts, and CUDA on the trainer for `vllm_transport: nccl` (ConfigError otherwise)."""
    if not cfg.rollout.vllm_urls:
        server_python(cfg.rollout.vllm_python)
    if cfg.rollout.vllm_transport == "nccl":
        import torch

        if not torch.cuda.is_available():
            raise ConfigError("rollout.vllm_transport=nccl: needs rollout.engine=vllm_server and CUDA on "
                              "the trainer (NCCL broadcasts GPU tensors; this machine has none: use shm)")
