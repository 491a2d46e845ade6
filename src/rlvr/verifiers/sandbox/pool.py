"""The trusted side of the sandbox: a pool of zygotes, one job at a time each, with futures.

`SandboxPool.run(mode, payload)` sends a job to an idle zygote and returns its raw result (status,
exit code, capped stdout/stderr, wall and CPU time). `submit` does the same on a thread pool and
returns a Future, so a training loop can overlap scoring with generation. A zygote that dies, hangs
past the job deadline plus a grace period, or has served `recycle_after` jobs is killed and
replaced. Zygotes are started with exec (never by forking the grader), with an empty environment,
as a dedicated uid when the grader is root. The pool refuses to start without isolation unless
`allow_unsafe=True`. Not guaranteed: fairness between concurrent callers, or any result ordering
other than per-future.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import weakref
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any, Callable

from rlvr.verifiers.sandbox import cgroup, wipe
from rlvr.verifiers.sandbox.probe import Capabilities, bwrap_args, probe

log = logging.getLogger(__name__)
INSIDE_FILES = ("zygote.py", "driver.py", "codec.py", "seccomp.py", "landlock.py", "wipe.py",
                "diskwatch.py")
READ_PATHS = ["/usr", "/lib", "/lib64", "/bin", "/etc/ld.so.cache", "/etc/alternatives",
              "/etc/localtime"]
GRACE_S = 3.0


_SAID = {"no_cgroup": False}   # warnings given once a process


class SandboxUnavailable(RuntimeError):
    """No isolation tier is usable and unsafe execution was not allowed."""


class Zygote:
    """One sandboxed zygote process and the pipes to it. Not thread-safe: the pool serialises."""

    def __init__(self, caps: Capabilities, sbxdir: str, tmpfs_mb: int,
                 cgroup_limits: tuple[int, int] | None = None):
        self.caps, self.sbxdir, self.tmpfs_mb = caps, sbxdir, tmpfs_mb
        self.cgroup_limits = cgroup_limits    # (memory bytes, pids) for the whole zygote tree
        self.cgroups: list = []
        self.proc: subprocess.Popen | None = None
        self.workdir: str | None = None
        self.jobs = 0
        self._buf = b""
        self._removals: list[threading.Thread] = []   # old work directories being removed

    def start(self) -> None:
        caps, uid = self.caps, self.caps.run_uid
        cfg: dict[str, Any] = {"landlock": caps.landlock_abi, "grader_pid": 0, "tier": caps.tier}
        prefix = str(Path(caps.python).resolve().parent.parent)  # the interpreter's stdlib
        if caps.tier == "bwrap":
            if caps.bwrap is None:
                raise SandboxUnavailable("the bwrap tier was given without a bwrap binary")
            cfg.update(workdir="/tmp", pidns=True, read_paths=READ_PATHS + ["/sbx", prefix])
            argv = bwrap_args(caps.bwrap, caps.python, self.sbxdir, uid is not None,
                              self.tmpfs_mb) + ["/sbx/zygote.py"]
        else:
            self.workdir = tempfile.mkdtemp(prefix="rlvr-job-")
            if uid is not None:
                os.chown(self.workdir, uid, uid)
            # No tmpfs bounds a job directory on the host disk: the zygote measures it instead.
            cfg.update(workdir=self.workdir, pidns=False, grader_pid=os.getpid(),
                       disk_mb=self.tmpfs_mb,
                       read_paths=READ_PATHS + [self.sbxdir, prefix])
            argv = [caps.python, "-I", "-S", os.path.join(self.sbxdir, "zygote.py")]
        # Test sources travel as memfds over this socket, so they never enter the zygote's
        # memory (nor, through fork, any job's): only the file descriptor passes through it.
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        cfg["blob_sock"] = theirs.fileno()
        try:
            self.proc = subprocess.Popen(
                argv + [json.dumps(cfg)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL, env={"PATH": "/usr/bin:/bin"},
                cwd=self.workdir or "/", user=uid, group=uid,
                extra_groups=[] if uid is not None else None, start_new_session=True,
                pass_fds=(theirs.fileno(),))
        finally:
            theirs.close()
        self._buf, self.jobs = b"", 0
        ready = self._read_line(time.monotonic() + 30)
        if ready is not None and "refused" in ready:
            self.stop()
            raise SandboxUnavailable(f"tier {self.caps.tier} refused: {ready['refused']}")
        if ready is None or "ready" not in ready:
            self.stop()
            raise SandboxUnavailable(f"zygote failed to start ({self.caps.tier})")
        self._confine()

    def _pipes(self) -> tuple[subprocess.Popen, IO[bytes], IO[bytes]]:
        """The started zygote with its stdin and stdout (`start` opens both as pipes)."""
        proc = self.proc
        if proc is None or proc.stdin is None or proc.stdout is None:
            raise RuntimeError("the zygote is not running")
        return proc, proc.stdin, proc.stdout

    def _confine(self) -> None:
        """Put the started zygote tree in its own cgroup when the machine allows (root)."""
        if self.cgroup_limits is None:
            return
        pid = self._pipes()[0].pid
        name = f"rlvr-sandbox-{os.getpid()}-{pid}"
        self.cgroups = cgroup.create(name, *self.cgroup_limits) or []
        cgroup.attach(self.cgroups, cgroup.tree(pid))
        if not self.cgroups and not _SAID["no_cgroup"]:
            _SAID["no_cgroup"] = True
            log.warning("sandbox: no cgroup for the zygotes here (%s): a job's memory is bounded "
                        "per process only (RLIMIT_AS), not summed over its processes; run the "
                        "grader as root on cgroup v2 for the %d MiB aggregate bound",
                        "not root" if os.geteuid() else "cgroup v2 not writable",
                        self.cgroup_limits[0] >> 20)

    def _read_line(self, deadline: float) -> dict | None:
        fd = self._pipes()[2].fileno()
        while b"\n" not in self._buf:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                return None
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return None
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return json.loads(line)

    def run(self, job: dict, on_event: Callable[[str], bool] | None = None,
            blob: str | None = None) -> dict:
        """Run `job`; `on_event(line)` sees each result line as it comes and may stop the job;
        `blob` (a test source) reaches the job as fd 3, never through the zygote's memory."""
        if self.proc is not None and self.proc.poll() is not None:
            self.stop()  # died since the last job: release its cgroup and work dir first
        if self.proc is None:
            self.start()
        deadline = time.monotonic() + float(job["timeout_s"]) + GRACE_S
        if self.cgroups:
            job = {**job, "nproc": 0}   # the cgroup's pids.max bounds the tree, per zygote
        try:
            if blob is not None:
                _send_blob(self.sock, blob)
            line = json.dumps({**job, "stream": on_event is not None,
                               "blob": blob is not None}) + "\n"
            stdin = self._pipes()[1]
            stdin.write(line.encode())
            stdin.flush()
            reply, stopped = self._read_line(deadline), False
            while reply is not None and "ev" in reply:
                if not stopped and _wants_stop(on_event, reply["ev"]):
                    stdin.write(b"stop\n")
                    stdin.flush()
                    stopped = True
                reply = self._read_line(deadline)
        except OSError:
            reply = None
        self.jobs += 1
        if reply is None:
            log.warning("sandbox zygote died or hung; respawning")
            self.stop()
            return {"status": "zygote_lost", "code": None, "out": "", "err": "", "wall": 0.0,
                    "cpu": 0.0}
        if reply.get("dirty"):
            # The job left what the zygote could not remove: no later job may see it.
            log.warning("sandbox job left files its zygote could not remove; respawning")
            self.stop()
        return reply

    def stop(self) -> None:
        """Kill the zygote tree and release its work directory and cgroup; never raises (the
        work directory is a tree a job shaped: `wipe` removes it without following links)."""
        try:
            self._kill()
        except Exception:
            log.exception("sandbox zygote: stopping it failed")
        if self.workdir:
            # On a slow disk a job's tree takes seconds to remove: not on the caller's time.
            removal = threading.Thread(target=_remove_workdir, args=(self.workdir,), daemon=True,
                                       name="sandbox-wipe")
            removal.start()
            self._removals.append(removal)
        self.workdir = None
        try:
            cgroup.remove(self.cgroups)
        except Exception:
            log.exception("sandbox zygote: removing its cgroup failed")
        self.cgroups = []

    def wait_removed(self) -> None:
        """Wait until the work directories of stopped zygotes are removed."""
        removals, self._removals = self._removals, []
        for removal in removals:
            removal.join()

    def _kill(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.kill()
        proc.wait()
        for f in (proc.stdin, proc.stdout, self.sock):
            if f is not None:
                f.close()


def _remove_workdir(path: str) -> None:
    if not wipe.remove(path):
        log.warning("sandbox work directory %s could not be removed whole", path)


def _send_blob(sock: socket.socket, text: str) -> None:
    fd = os.memfd_create("rlvr-tests", os.MFD_CLOEXEC)
    try:
        data = text.encode()
        while data:
            data = data[os.write(fd, data):]
        os.lseek(fd, 0, os.SEEK_SET)
        socket.send_fds(sock, [b"b"], [fd])
    finally:
        os.close(fd)


def _wants_stop(on_event: Callable[[str], bool] | None, line: str) -> bool:
    """The caller's verdict on a streamed line; a failing callback stops the job, never the pool,
    and so does a line nobody asked for (the zygote streams only when given a callback)."""
    if on_event is None:
        log.error("sandbox zygote streamed an event unasked; stopping the job")
        return True
    try:
        return bool(on_event(line))
    except Exception:
        log.exception("sandbox event callback failed; stopping the job")
        return True


def _stage_inside_files(run_uid: int | None) -> str:
    """Copy the stdlib-only sandbox modules to a directory the sandbox uid can read."""
    here = Path(__file__).parent
    dest = tempfile.mkdtemp(prefix="rlvr-sbx-")
    for name in INSIDE_FILES:
        shutil.copyfile(here / name, os.path.join(dest, name))
        os.chmod(os.path.join(dest, name), 0o444)
    os.chmod(dest, 0o555)
    return dest


def _shutdown(idle: queue.Queue, sbxdir: str) -> None:
    zygotes = []
    while not idle.empty():
        zygotes.append(idle.get())
        zygotes[-1].stop()
    for zygote in zygotes:
        zygote.wait_removed()
    if os.path.isdir(sbxdir):
        os.chmod(sbxdir, 0o700)  # staged read-only; an unprivileged owner must open it to delete
        shutil.rmtree(sbxdir, ignore_errors=True)


class SandboxPool:
    """`workers` zygotes (default: the CPU cores this process may use), created lazily.

    Limits per job: `timeout_s` of wall-clock time (the hard cap), `cpu_s` of CPU time (default:
    the same; on a loaded machine a CPU budget below the wall cap keeps slow-but-correct programs
    from flipping to `timeout`), `mem_mb` of address space per process, `nproc` processes.
    """

    def __init__(self, workers: int | None = None, *, tier: str | None = None,
                 allow_unsafe: bool = False, timeout_s: float = 4.0,
                 cpu_s: float | None = None, mem_mb: int = 1024,
                 nproc: int = 64, out_cap: int = 1 << 20, tmpfs_mb: int = 64,
                 recycle_after: int = 1000):
        self.caps = probe(tier)
        if self.caps.tier not in ("bwrap", "landlock") and not allow_unsafe:
            raise SandboxUnavailable(
                f"no isolation available (tier {self.caps.tier}: {self.caps.reason}); "
                "pass allow_unsafe=True only on a machine you do not mind losing")
        if tier is not None and self.caps.tier != tier:
            raise SandboxUnavailable(f"tier {tier} unavailable: {self.caps.reason}")
        if self.caps.tier == "bwrap" or tier is not None:
            log.info("sandbox tier %s (%s)", self.caps.tier, self.caps.reason or "preferred")
        else:   # said, not silent: the preferred tier failed on this host
            log.warning("sandbox tier %s, not bwrap: %s", self.caps.tier, self.caps.reason)
        self.workers = workers or len(os.sched_getaffinity(0))
        self.defaults = {"timeout_s": timeout_s, "cpu_s": cpu_s, "mem_mb": mem_mb,
                         "nproc": nproc, "out_cap": out_cap}
        self.recycle_after = recycle_after
        self._sbxdir = _stage_inside_files(self.caps.run_uid)
        self._idle: queue.LifoQueue[Zygote] = queue.LifoQueue()
        # A job tree may hold `nproc` processes of `mem_mb` each; the cgroup caps their sum.
        limits = ((2 * mem_mb + 256) << 20, nproc + 16)
        for _ in range(self.workers):
            self._idle.put(Zygote(self.caps, self._sbxdir, tmpfs_mb, limits))
        self._executor = ThreadPoolExecutor(self.workers, thread_name_prefix="sandbox")
        self._lock = threading.Lock()
        self._closed = False
        # Zygotes and the staged files go away even when the owner forgets close().
        self._finalizer = weakref.finalize(self, _shutdown, self._idle, self._sbxdir)

    @property
    def tier(self) -> str:
        return self.caps.tier

    def run(self, mode: str, payload: dict, on_event: Callable[[str], bool] | None = None,
            blob: str | None = None, **limits: Any) -> dict:
        """Run one job and return the zygote's result dict (blocking); see `Zygote.run`."""
        job = {**self.defaults, **limits, "mode": mode, "payload": payload}
        zygote = self._idle.get()
        try:
            if zygote.jobs >= self.recycle_after:
                zygote.stop()
            return zygote.run(job, on_event, blob)
        finally:
            self._idle.put(zygote)

    def start(self) -> None:
        """Start every zygote now (instead of at first use), so start-up failures show early."""
        zygotes = [self._idle.get() for _ in range(self.workers)]
        try:
            for zygote in zygotes:
                if zygote.proc is None:
                    zygote.start()
        finally:
            for zygote in zygotes:
                self._idle.put(zygote)

    def workdirs(self) -> list[str]:
        """Host work directories of the zygotes (empty in the bwrap tier: theirs is a tmpfs)."""
        return [z.workdir for z in list(self._idle.queue) if z.workdir]

    def submit(self, mode: str, payload: dict, on_event: Callable[[str], bool] | None = None,
               blob: str | None = None, **limits: Any) -> Future:
        return self._executor.submit(self.run, mode, payload, on_event, blob, **limits)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._executor.shutdown(wait=True)
        self._finalizer()

    def __enter__(self) -> "SandboxPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
