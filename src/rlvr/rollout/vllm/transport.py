"""How new weights reach the vLLM servers (`rollout.vllm_transport`), chosen once by `TRANSPORTS`.

A transport offers `write(state)` (take the state dict to send), `request(version)` (the request
each server is sent; it answers the tensor count and `vllm_worker.state_hash` of what it loaded,
which the engine checks), `stream()` (run after every server was sent its request and before any
reply is read: the bytes themselves, where the transport moves them outside the request),
`connect(servers)` (once, after the servers listen), `view(k)` (the transport of the k-th shared
view of the engine, `VLLMServerEngine.share`), `restartable` (whether a fresh server can be given
the weights by `request` alone) and `path` (the file a server reads, "" when there is none).

- `shm` (`FileTransport`, the default): one safetensors file under the engine's directory (in
  /dev/shm when it has room, `weights_dir`), written whole and renamed into place, read by each
  server's worker. Tested on CPU (tests/engine_vllm). Servers on the trainer's host only.
- `nccl` (`NcclTransport`): a process group of the trainer (rank 0) and one worker per server
  (ranks 1..N), made once from a TCP store the trainer hosts; each push sends the names, dtypes and
  shapes in the request and broadcasts every tensor from the trainer's GPU, which each worker
  receives on its own GPU and loads, as TRL's server mode does it. Needs CUDA on the trainer and
  one worker per server (tensor_parallel_size 1); refused without CUDA when the run opens
  (`training.setup.check_engine`). A server that dies is not restarted under it (the group's
  membership is fixed once made). **Unverified**: written for GPUs, never run (no GPU build of
  vLLM could be installed for this work); tests/engine_vllm/test_vllm_servers_nccl.py (marked
  `gpu`) is the check to run on one.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from typing import Any, Sequence

log = logging.getLogger(__name__)

SHM = "/dev/shm"
DIR_PREFIX = "rlvr-vllm-servers-"


def weights_dir(model_bytes: int, shm: str = SHM) -> str:
    """A fresh directory for the servers' model and weight files: in `shm` (the weights never touch
    a disk) when it has room for three copies (the model, the weights file, its next version being
    written), else on the disk's temp directory, said in the log (Docker's default /dev/shm is
    64 MiB: a 135M-parameter model did not fit and its servers failed to start). Directories that
    a run which is gone left in `shm` (killed at once, nothing cleaned) are removed first."""
    if os.path.isdir(shm):
        sweep_stale(shm)
        free = shutil.disk_usage(shm).free
        if free >= 3 * model_bytes + (64 << 20):
            return tempfile.mkdtemp(prefix=f"{DIR_PREFIX}{os.getpid()}-", dir=shm)
        log.warning("%s has %d MiB free, the servers' files need about %d MiB: they go to %s "
                    "instead (a disk, slower; give the container more shared memory, e.g. "
                    "docker run --shm-size=2g)", shm, free >> 20, (3 * model_bytes) >> 20,
                    tempfile.gettempdir())
    return tempfile.mkdtemp(prefix=f"{DIR_PREFIX}{os.getpid()}-")


def sweep_stale(shm: str = SHM) -> list[str]:
    """Remove this user's server directories in `shm` whose run (the pid in the name) is gone."""
    removed = []
    for name in os.listdir(shm):
        pid, mark, _ = name[len(DIR_PREFIX):].partition("-")
        if not (name.startswith(DIR_PREFIX) and pid.isdigit() and mark):
            continue
        path = os.path.join(shm, name)
        try:
            if os.lstat(path).st_uid != os.geteuid():
                continue
            os.kill(int(pid), 0)
            continue                       # its run is alive
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
        except OSError:
            continue                       # gone meanwhile, or a live pid of another user
    return removed


class FileTransport:
    restartable = True

    def __init__(self, directory: str, name: str = "weights.safetensors"):
        self.directory, self.path = directory, os.path.join(directory, name)

    def connect(self, servers: Sequence[Any]) -> None:
        """Nothing to set up: each server reads the file when asked."""

    def write(self, state: dict) -> None:
        from safetensors.torch import save_file

        tmp = self.path + ".tmp"
        save_file({k: v.detach().to("cpu").contiguous() for k, v in state.items()}, tmp)
        os.replace(tmp, self.path)   # a server restarted meanwhile never reads half a file

    def request(self, version: int) -> dict:
        return {"op": "load", "path": self.path, "version": version}

    def stream(self) -> None:
        """The file is the transfer: nothing moves between the request and the reply."""

    def view(self, k: int) -> "FileTransport":
        return FileTransport(self.directory, f"{os.path.basename(self.path)}.{k}")


class NcclTransport:
    restartable = False
    path = ""

    def __init__(self, directory: str = ""):
        self.group: Any = None
        self.device: Any = None
        self.state: dict = {}

    def connect(self, servers: Sequence[Any]) -> None:
        """Make the process group: every server is asked to join (rank s + 1) before the trainer
        hosts the store and joins as rank 0; NCCL itself connects at the first broadcast."""
        import torch
        import torch.distributed as dist

        host, port, world = _address_towards(servers[0].address[0]), _free_port(), len(servers) + 1
        for s, server in enumerate(servers):
            server.send({"op": "nccl_init", "host": host, "port": port, "rank": s + 1, "world": world})
        store = dist.TCPStore(host, port, world, is_master=True, wait_for_workers=False)
        self.group = dist.ProcessGroupNCCL(store, 0, world, dist.ProcessGroupNCCL.Options())
        self.device = torch.device("cuda", torch.cuda.current_device())
        for server in servers:
            server.recv()

    def write(self, state: dict) -> None:
        self.state = {k: v.detach().to(self.device).contiguous() for k, v in state.items()}

    def request(self, version: int) -> dict:
        meta = [(name, str(t.dtype).removeprefix("torch."), list(t.shape)) for name, t in self.state.items()]
        return {"op": "nccl_load", "meta": meta, "version": version}

    def stream(self) -> None:
        """Every tensor, in the order of the request's names, from rank 0 to all."""
        import torch.distributed as dist

        opts = dist.BroadcastOptions()
        opts.rootRank = 0
        for tensor in self.state.values():
            self.group.broadcast([tensor], opts).wait()

    def view(self, k: int) -> "NcclTransport":
        """A shared view pushes over the same group (calls on the servers are serialised)."""
        twin = NcclTransport()
        twin.group, twin.device = self.group, self.device
        return twin


TRANSPORTS = {"shm": FileTransport, "nccl": NcclTransport}


def receive(group, meta: list, device) -> dict:
    """The worker's side of `NcclTransport.stream`: the tensors named in `meta`, in its order."""
    import torch
    import torch.distributed as dist

    opts = dist.BroadcastOptions()
    opts.rootRank = 0
    state = {}
    for name, dtype, shape in meta:
        tensor = torch.empty(shape, dtype=getattr(torch, dtype), device=device)
        group.broadcast([tensor], opts).wait()
        state[name] = tensor
    return state


def join(host: str, port: int, rank: int, world: int):
    """The worker's side of `NcclTransport.connect`: its member of the trainer's group."""
    import torch.distributed as dist

    store = dist.TCPStore(host, port, world, is_master=False)
    return dist.ProcessGroupNCCL(store, rank, world, dist.ProcessGroupNCCL.Options())


def _address_towards(host: str) -> str:
    """This host's address on the route to `host` (a UDP socket connects without sending)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect((host, 9))
        return s.getsockname()[0]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]
