"""Per-zygote cgroups (root only, best effort): a memory and a pids ceiling for a whole job tree.

rlimits bound one process each; a job that forks N children may use N times its address-space
limit. When the grader is root and the machine has a writable memory+pids cgroup (v2 with both
controllers already enabled at the root, or v1 `memory` and `pids` hierarchies), each zygote and
everything it forks are put in a fresh cgroup with `memory` and `pids` ceilings. Otherwise nothing
is done and `create` returns None: the rlimits remain the only bound (say so in logs).
Not guaranteed: swap accounting (v1 `memsw` is not set), or cleanup of a cgroup whose processes
could not be killed.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")


def _v2_usable() -> bool:
    try:
        enabled = (ROOT / "cgroup.subtree_control").read_text().split()
    except OSError:
        return False
    return "memory" in enabled and "pids" in enabled


def _v1_usable() -> bool:
    return all((ROOT / c / "cgroup.procs").exists() for c in ("memory", "pids"))


def create(name: str, mem_bytes: int, max_pids: int) -> list[Path] | None:
    """Make the cgroup(s) for one zygote; None when unavailable (not root, not writable)."""
    if os.geteuid() != 0:
        return None
    try:
        if _v2_usable():
            d = ROOT / name
            d.mkdir()
            (d / "memory.max").write_text(str(mem_bytes))
            (d / "pids.max").write_text(str(max_pids))
            return [d]
        if _v1_usable():
            mem, pids = ROOT / "memory" / name, ROOT / "pids" / name
            mem.mkdir()
            pids.mkdir()
            (mem / "memory.limit_in_bytes").write_text(str(mem_bytes))
            (pids / "pids.max").write_text(str(max_pids))
            return [mem, pids]
    except OSError:
        return None
    return None


def attach(dirs: list[Path], pids: list[int]) -> None:
    for d in dirs:
        for pid in pids:
            try:
                (d / "cgroup.procs").write_text(str(pid))
            except ProcessLookupError:
                pass


def remove(dirs: list[Path]) -> None:
    """rmdir the cgroups once their processes are gone (retries briefly while they exit)."""
    for d in dirs:
        for _ in range(50):
            try:
                d.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.01)


def tree(pid: int) -> list[int]:
    """`pid` and its descendants, from /proc/<pid>/task/*/children."""
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        try:
            for tid in os.listdir(f"/proc/{p}/task"):
                todo += [int(c) for c in Path(f"/proc/{p}/task/{tid}/children").read_text().split()]
        except OSError:
            continue
    return found
