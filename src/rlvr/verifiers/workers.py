"""A small pool of worker processes that run checks under a hard wall-clock budget.

`WorkerPool.run(fn_path, args, budget_s)` sends one call to an idle worker and waits at most
`budget_s` for its answer. A worker that overruns is killed (SIGKILL) and replaced by a fresh one
started in the background, so a hostile input can cost at most its budget. This works from any
thread and any process, unlike signal-based timeouts, because the waiting is `Connection.poll`.

Workers are fresh interpreters (`python -c`), never forks of a possibly multi-threaded torch
parent. Functions are named by "module:attr" so that workers import
them themselves. Guarantees: `run` returns within budget plus the time to obtain an idle worker
(bounded by `acquire_s`); it never raises on a worker's crash or overrun, it returns an `Outcome`.
Each worker's address space is capped (`memory_mb`, default 2 GiB), so an input that allocates
without bound fails inside its worker (verdict "crash") rather than exhausting the host.
Not guaranteed: that a killed worker's half-done work leaves no trace outside its own process.
"""

from __future__ import annotations

import atexit
import importlib
import os
import subprocess
import sys
import threading
import time
import weakref
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any


@dataclass(frozen=True)
class Outcome:
    status: str          # "ok" | "timeout" | "crash"
    value: Any = None
    ms: float = 0.0


def _call(functions: dict[str, Any], fn_path: str, args: tuple) -> Any:
    fn = functions.get(fn_path)
    if fn is None:
        module, _, attr = fn_path.partition(":")
        fn = functions[fn_path] = getattr(importlib.import_module(module), attr)
    return fn(*args)


def _worker_main(read_fd: int, write_fd: int, preload: tuple[str, ...], warmup: tuple,
                 memory_mb: int = 0) -> None:
    """Worker loop: import, warm up, say "ready", then answer each (fn_path, args) with
    ("ok", value) or ("error", repr)."""
    if memory_mb > 0:  # a hostile input then fails with MemoryError instead of swapping the host
        import resource

        limit = memory_mb * 2**20
        try:
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        except (ValueError, OSError):
            pass
    inbox, outbox = Connection(read_fd, writable=False), Connection(write_fd, readable=False)
    for module in preload:
        importlib.import_module(module)
    functions: dict[str, Any] = {}
    for fn_path, args in warmup:
        try:
            _call(functions, fn_path, args)
        except Exception:
            pass
    try:
        outbox.send(("ready", None))
    except OSError:  # the pool closed while this worker was starting
        return
    while True:
        try:
            fn_path, args = inbox.recv()
        except (EOFError, OSError):
            return
        try:
            outbox.send(("ok", _call(functions, fn_path, args)))
        except Exception as exc:  # a crashing check is a verdict, not a dead worker
            outbox.send(("error", repr(exc)[:500]))


class _Worker:
    """One child interpreter started with `python -c`, talking over two pipes.

    A fresh interpreter rather than multiprocessing's spawn/forkserver: those re-import the parent's
    `__main__`, which breaks scripts without a main guard; and never `fork`, which would copy a
    multi-threaded torch parent.
    """

    def __init__(self, preload: tuple[str, ...], warmup: tuple, ready_s: float, memory_mb: int = 0):
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        code = (f"from rlvr.verifiers.workers import _worker_main; "
                f"_worker_main({to_child_r}, {from_child_w}, {preload!r}, {warmup!r}, {memory_mb})")
        env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        try:
            self.proc = subprocess.Popen([sys.executable, "-c", code], env=env,
                                         pass_fds=(to_child_r, from_child_w),
                                         stdin=subprocess.DEVNULL)
        finally:
            os.close(to_child_r)
            os.close(from_child_w)
        self.send_conn = Connection(to_child_w, readable=False)
        self.recv_conn = Connection(from_child_r, writable=False)
        # The budget of a check must not pay for imports and sympy's first-call set-up.
        try:
            ready = self.recv_conn.poll(ready_s) and self.recv_conn.recv()[0] == "ready"
        except (EOFError, OSError):
            ready = False
        if not ready:
            self.kill()
            raise RuntimeError("verifier worker did not start")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        self.send_conn.close()
        self.recv_conn.close()


class WorkerPool:
    """`size` worker processes shared by all threads of this process; started on first use."""

    def __init__(self, size: int = 2, preload: tuple[str, ...] = (), warmup: tuple = (),
                 acquire_s: float = 60.0, memory_mb: int = 2048):
        self.size = max(1, size)
        self.memory_mb = memory_mb
        self.preload = preload
        self.warmup = tuple(warmup)
        self.acquire_s = acquire_s
        self._idle: list[_Worker] = []
        self._count = 0               # workers alive or starting
        self._cond = threading.Condition()
        self._closed = False
        _POOLS.add(self)

    def _spawn(self) -> None:
        """Start a worker and hand it to the idle list (called without the lock held)."""
        try:
            worker = _Worker(self.preload, self.warmup, self.acquire_s, self.memory_mb)
        except Exception:
            with self._cond:
                self._count -= 1
                self._cond.notify_all()
            raise
        with self._cond:
            if self._closed:
                worker.kill()
                return
            self._idle.append(worker)
            self._cond.notify_all()

    def _acquire(self) -> _Worker | None:
        deadline = time.monotonic() + self.acquire_s
        start_one = False
        with self._cond:
            if self._count == 0 and not self._closed:
                # First use starts the whole pool, so that one overrun never leaves it empty.
                self._count = self.size - 1
                for _ in range(self.size - 1):
                    threading.Thread(target=self._respawn, daemon=True).start()
            while not self._idle:
                if self._count < self.size and not start_one:
                    self._count += 1
                    start_one = True
                    break
                left = deadline - time.monotonic()
                if left <= 0 or not self._cond.wait(timeout=left):
                    return None
            if not start_one:
                return self._idle.pop()
        self._spawn()
        return self._acquire()

    def _release(self, worker: _Worker) -> None:
        with self._cond:
            self._idle.append(worker)
            self._cond.notify_all()

    def _replace(self, worker: _Worker) -> None:
        worker.kill()
        threading.Thread(target=self._respawn, daemon=True).start()

    def _respawn(self) -> None:
        try:
            self._spawn()
        except Exception:
            pass

    def run(self, fn_path: str, args: tuple, budget_s: float) -> Outcome:
        """Call `fn_path(*args)` in a worker; kill the worker if it takes more than `budget_s`."""
        try:
            worker = self._acquire()
        except Exception:  # no worker could be started: a verdict of its own, not an exception
            return Outcome("crash", None, 0.0)
        if worker is None:
            return Outcome("timeout", None, 0.0)
        t0 = time.perf_counter()
        try:
            worker.send_conn.send((fn_path, args))
            ready = worker.recv_conn.poll(budget_s)
            reply = worker.recv_conn.recv() if ready else None
        except (EOFError, OSError, BrokenPipeError):
            self._replace(worker)
            return Outcome("crash", None, (time.perf_counter() - t0) * 1000)
        ms = (time.perf_counter() - t0) * 1000
        if reply is None:
            self._replace(worker)
            return Outcome("timeout", None, ms)
        self._release(worker)
        status, value = reply
        return Outcome("ok" if status == "ok" else "crash", value, ms)

    def warm(self) -> None:
        """Start all workers now (e.g. before timing), instead of on first use."""
        workers = [self._acquire() for _ in range(self.size)]
        for w in workers:
            if w is not None:
                self._release(w)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
        for w in idle:
            w.kill()


_POOLS: "weakref.WeakSet[WorkerPool]" = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for pool in list(_POOLS):
        pool.close()
