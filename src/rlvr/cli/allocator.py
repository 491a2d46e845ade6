"""The `rlvr` command's C memory allocator: mimalloc where its wheel is installed, else glibc's.

Why: a CPU training step allocates and frees hundreds of tensors whose sizes change from step to
step (batch rows, completion widths). glibc's heap fragments under that pattern: on the built-in
tiny model's step its arena grew 150 -> 609 MB over 12 steps with 120-260 MB of it free, and every
step that grew it faulted 16-38 thousand fresh pages in, 0.2-0.45 s of system time on a KVM guest
(a 0.45 s step). mimalloc (the `cmeel-mimalloc` wheel, a dependency on Linux x86-64) reuses freed
memory by size class; `bench/grpo_vs_trl.py` and `bench/host_memory.py` measure it.

How: the console script (`entry`) re-executes its own interpreter once, before torch is imported,
with LD_PRELOAD naming libmimalloc, the only way to replace the allocator of a process that has
already started. The new process takes LD_PRELOAD back out of its environment (restoring the
caller's own), so subprocesses (sandboxed verifiers, vLLM servers, workers) start as they would
have (a nested `rlvr` command preloads for itself). `RLVR_ALLOCATOR=system` keeps glibc's malloc.
Not preloaded: on a machine with an NVIDIA driver (a GPU run spends no time in host malloc;
unmeasured there), where the wheel is missing, or when `rlvr.cli.main(argv)` is called in a
running interpreter (its allocator stays). Results do not depend on it: the tiny model's run gave
the same metric lines and byte-identical weights on both (torch asks every allocator for 64-byte
aligned blocks).

Memory: mimalloc keeps what it freed (MIMALLOC_PURGE_DELAY=-1, unless the caller set it): at its
default (purged after 10 ms) every update of the smollm2 preset's batch faulted 0.2-0.5 M pages
back in (5-8 s of system time per update, slower than glibc); kept, RSS stays at the run's high
water mark, which mimalloc's size classes hold lower than glibc's fragmented heap (5.2 GB against
6.6-7.7 GB over 12 updates, `bench/host_memory.py`). The glibc-only heap trimming in
`models.device` is then a no-op.
"""

from __future__ import annotations

import functools
import os
import sys
from typing import Sequence

# the caller's own LD_PRELOAD, handed to the re-executed process (which it marks) and restored there
_WAS = "RLVR_ALLOCATOR_LD_PRELOAD_WAS"
_CHOICE = "RLVR_ALLOCATOR"            # "system": no preload
# mimalloc's options as the `rlvr` command sets them (each only where the caller has not)
OPTIONS = {"MIMALLOC_PURGE_DELAY": "-1"}


@functools.lru_cache(maxsize=1)
def mimalloc_library() -> str | None:
    """The path of libmimalloc from the installed `cmeel-mimalloc` wheel, or None."""
    from importlib import metadata

    try:
        files = metadata.files("cmeel-mimalloc") or []
    except metadata.PackageNotFoundError:
        return None
    libs = sorted(str(f.locate()) for f in files if f.name.startswith("libmimalloc.so"))
    found = [p for p in libs if os.path.isfile(p)]
    return min(found, key=len) if found else None


def preload_reason() -> str | None:
    """Why the allocator is not to be preloaded here (None: preload it)."""
    if os.environ.get(_CHOICE, "mimalloc") == "system":
        return f"{_CHOICE}=system"
    if not sys.platform.startswith("linux"):
        return "not Linux"
    if os.path.exists("/proc/driver/nvidia"):
        return "a GPU machine"
    if mimalloc_library() is None:
        return "cmeel-mimalloc is not installed"
    return None


def reexec_preloaded(argv: Sequence[str]) -> None:
    """Replace this process by `argv` with mimalloc preloaded, unless already done or not wanted;
    returns only when nothing was replaced."""
    if _WAS in os.environ:   # this is the re-executed process
        _restore_preload()
        return
    if preload_reason() is not None:
        return
    env = preload_env(dict(os.environ))
    env[_WAS] = os.environ.get("LD_PRELOAD", "")
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *_interpreter_options(), *argv], env)


def _interpreter_options() -> list[str]:
    """The interpreter's own options this process started with (`-u` from torchrun, `-X dev`...),
    up to the module, script or command: the re-executed process keeps them."""
    out = []
    for arg in getattr(sys, "orig_argv", [])[1:]:
        if arg in ("-m", "-c") or arg == sys.argv[0] or not arg.startswith("-"):
            break
        out.append(arg)
    return out


def preload_env(env: dict[str, str]) -> dict[str, str]:
    """`env` with libmimalloc first in LD_PRELOAD and `OPTIONS` where unset (for a process to start
    on mimalloc: the re-executed command, or a benchmark's child)."""
    env = {**OPTIONS, **env}
    env["LD_PRELOAD"] = f"{mimalloc_library()} {env.get('LD_PRELOAD', '')}".strip()
    return env


def _restore_preload() -> None:
    """In the re-executed process: the caller's LD_PRELOAD back, for every subprocess it starts."""
    was = os.environ.pop(_WAS)
    if was:
        os.environ["LD_PRELOAD"] = was
    else:
        os.environ.pop("LD_PRELOAD", None)
