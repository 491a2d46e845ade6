"""Emptying a directory tree that an untrusted job shaped, without being steered by it.

`empty(path)` removes everything beneath `path` (not `path` itself); `remove(path)` also removes
`path`. Both return True when nothing is left and never raise. Guarantees: no symbolic link is ever
followed (a directory is entered by opening it relative to its parent's descriptor with O_NOFOLLOW,
and an entry's type comes from lstat, never stat); every directory is made 0700 before it is
listed (an O_PATH descriptor first, so the mode change lands on that directory and not on what a
link names); the walk is iterative and holds at most three descriptors, so depth (1200 levels and
more) and width cost memory for names only; an optional time budget bounds it. Stdlib only: it
runs inside the sandbox (the zygote, between jobs) and in the grader (a zygote's host work
directory, `pool.Zygote.stop`). Not guaranteed: a tree that changes while it is emptied (callers
run it after the job's processes are gone) or removal of what the caller's uid may not remove
(reported by the False return).
"""

import os
import stat
import time

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_PATH = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
ATTEMPTS = 3  # whole walks: an entry a directory listing skipped is found by the next one


def _enter(name, dir_fd):
    """A read descriptor of the directory `name` in `dir_fd`, made 0700 first; never through a link."""
    pfd = os.open(name, _PATH, dir_fd=dir_fd)   # fails on a link (ELOOP) or a non-directory
    try:
        try:
            os.chmod(f"/proc/self/fd/{pfd}", 0o700)  # the inode pfd holds, whatever `name` is now
        except OSError:
            # No /proc here: `name` was a directory an instant ago and nothing runs to swap it.
            if stat.S_ISDIR(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode):
                os.chmod(name, 0o700, dir_fd=dir_fd)
        fd = os.open(name, _DIR, dir_fd=dir_fd)
    finally:
        os.close(pfd)
    return fd


def _scan(fd):
    """Unlink every entry of `fd` that is not a directory; (its subdirectories, all unlinked)."""
    subdirs, ok = [], True
    with os.scandir(fd) as entries:
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    subdirs.append(entry.name)
                else:
                    os.unlink(entry.name, dir_fd=fd)
            except OSError:
                ok = False
    return subdirs, ok


def _walk(top_fd, deadline):
    """Empty the directory `top_fd` (its descriptor stays open); True when all went in time."""
    cur = os.dup(top_fd)
    try:
        subdirs, ok = _scan(cur)
        stack = [("", subdirs)]   # (name in its parent, subdirectories still to remove)
        while stack:
            if time.monotonic() > deadline:
                return False
            pending = stack[-1][1]
            if pending:
                name = pending.pop()
                try:
                    child = _enter(name, cur)
                except OSError:
                    ok = False
                    continue
                os.close(cur)
                cur = child
                subdirs, scanned = _scan(cur)
                ok = ok and scanned
                stack.append((name, subdirs))
                continue
            name = stack.pop()[0]
            if not stack:
                break
            parent = os.open("..", _DIR, dir_fd=cur)
            os.close(cur)
            cur = parent
            try:
                os.rmdir(name, dir_fd=cur)
            except OSError:
                ok = False
    finally:
        os.close(cur)
    return ok


def empty(path, budget_s=None):
    """Remove everything beneath the directory `path`; True when it is empty afterwards (False
    also when `budget_s` seconds ran out first: on a disk where each rmdir is slow a job's tree
    can take longer to remove than the job ran)."""
    deadline = time.monotonic() + (float("inf") if budget_s is None else budget_s)
    try:
        top = os.open(path, _DIR)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    try:
        os.fchmod(top, 0o700)
        for _ in range(ATTEMPTS):
            if _walk(top, deadline) and not os.listdir(top):
                return True
        return False
    except Exception:
        return False
    finally:
        os.close(top)


def remove(path):
    """Remove the directory `path` and everything beneath it; True when it is gone."""
    try:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            os.unlink(path)
            return True
    except FileNotFoundError:
        return True
    except OSError:
        return False
    if not empty(path):
        return False
    try:
        os.rmdir(path)
        return True
    except FileNotFoundError:
        return True
    except OSError:
        return False
