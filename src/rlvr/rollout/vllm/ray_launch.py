"""vLLM servers placed by Ray (`rollout.engine: vllm_server` with `rollout.ray_address`).

`RayLauncher` offers the launcher members `VLLMServerEngine` uses (`rollout.vllm.launch.LocalLauncher`'s:
spawn, ready, kill, stop, pid). Each server is started by a small Ray actor (`ServerHost`) in its
own bundle of one placement group (1 GPU per server where the cluster has enough, else 1 CPU),
and that actor runs the server as a process of its own on its node, under the server interpreter
(`rollout.vllm_python`): Ray places the servers and holds their resources, vLLM need not be
importable where the Ray workers run. A server that dies is started again in the same bundle.
The key reaches each actor as a 0600 file under a 0700 directory of the trainer's node (its path
is the actor's argument, never the key: actor arguments are kept in Ray's object store, readable
by anyone who can connect to the cluster).

Tested on a local cluster (tests/distributed/test_ray_vllm_servers.py). Not verified: servers on
other nodes. They listen on their node's address, but the weights go as a file under /dev/shm of
the trainer's node (the engine's transport), which another node cannot read.
"""

from __future__ import annotations

import os
from typing import Any, cast


class ServerHost:
    """The Ray actor holding one server process."""

    def __init__(self, python: str, key_file: str):
        import ray

        from rlvr.rollout.vllm.launch import LocalLauncher

        with open(key_file) as f:          # never an actor argument: those sit in Ray's store
            key = f.read().strip()
        # the server's parent is this actor, not the trainer, and the weight files are on the
        # trainer's node: they are the trainer's to remove
        host = ray.util.get_node_ip_address()
        self.launcher, self.proc = LocalLauncher(python, key, host), cast(Any, None)

    def start(self, model_dir: str, options: dict) -> tuple[str, int, int]:
        self.proc = self.launcher.spawn(model_dir, options)
        host, port = self.launcher.ready(self.proc)
        return host, port, self.proc.pid

    def kill(self) -> None:
        if self.proc is not None:
            self.launcher.kill(self.proc)

    def stop(self) -> None:
        if self.proc is not None:
            self.launcher.stop(self.proc)


class RayLauncher:
    """Servers as Ray-placed processes: one bundle per server, reused when a server restarts."""

    def __init__(self, python: str, key: str, servers: int, address: str = "local"):
        """`address`: a cluster's (`ray.init(address=...)`), or "local" to start one here."""
        import ray
        from ray.util.placement_group import placement_group

        import tempfile

        self.ray, self.python, self.key = ray, python, bytes.fromhex(key)
        self.key_dir = tempfile.mkdtemp(prefix="rlvr-vllm-key-")     # 0700: this uid only
        self.key_file = os.path.join(self.key_dir, "key")
        fd = os.open(self.key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(key)
        self.started = not ray.is_initialized()
        if self.started:
            os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
            local: dict[str, Any] = {} if address != "local" else {
                "num_cpus": max(servers, os.cpu_count() or 1), "_node_ip_address": "127.0.0.1",
                "object_store_memory": 128 * 2**20}
            ray.init(address=None if address == "local" else address, include_dashboard=False,
                     log_to_driver=False, **local)
        self.gpu = ray.cluster_resources().get("GPU", 0) >= servers
        self.group = placement_group([{"GPU": 1} if self.gpu else {"CPU": 1}] * servers, strategy="PACK")
        ray.get(self.group.ready())
        self.free = list(range(servers))      # bundles without a server
        self.where: dict[int, int] = {}       # id(handle) -> its bundle

    def spawn(self, model_dir: str, options: dict):
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        bundle = self.free.pop(0)
        actor: Any = self.ray.remote(num_gpus=1 if self.gpu else 0, num_cpus=0 if self.gpu else 1)(ServerHost)
        host = actor.options(scheduling_strategy=PlacementGroupSchedulingStrategy(
            self.group, placement_group_bundle_index=bundle)).remote(self.python, self.key_file)
        handle = {"actor": host, "started": host.start.remote(model_dir, options), "pid": None}
        self.where[id(handle)] = bundle
        return handle

    def ready(self, handle) -> tuple[str, int]:
        host, port, handle["pid"] = self.ray.get(handle["started"])
        return host, port

    def pid(self, handle) -> int:
        return handle["pid"]

    def kill(self, handle) -> None:
        self._end(handle, "kill")

    def stop(self, handle) -> None:
        self._end(handle, "stop")

    def _end(self, handle, how: str) -> None:
        try:
            self.ray.get(getattr(handle["actor"], how).remote(), timeout=60)
        except Exception:  # the actor itself is gone: its process went with it
            pass
        self.ray.kill(handle["actor"])
        self.free.append(self.where.pop(id(handle)))

    def close(self) -> None:
        import shutil

        from ray.util.placement_group import remove_placement_group

        shutil.rmtree(self.key_dir, ignore_errors=True)
        remove_placement_group(self.group)
        if self.started:
            self.ray.shutdown()
