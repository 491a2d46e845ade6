"""Landlock through raw syscalls (stdlib + ctypes only): a filesystem allow-list per job.

Runs inside the sandbox, in each job process. Reads and executes are allowed beneath the given
read-only paths, everything beneath the job directory, nothing else; with ABI >= 4 every TCP bind
and connect is denied; with ABI >= 6 signals and abstract unix sockets are scoped to the job's own
domain, so a job cannot signal the zygote or the grader. `abi()` is 0 where the kernel has no
Landlock (or a seccomp profile hides it): callers decide whether that is acceptable. x86_64 and
aarch64 share these syscall numbers (444-446).
"""

import ctypes
import os
import struct

_CREATE, _ADD_RULE, _RESTRICT = 444, 445, 446
_VERSION_FLAG = 1
_RULE_PATH_BENEATH = 1

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1, 2, 4, 8
_FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1,
              5: (1 << 16) - 1}
_NET_ALL = 3      # BIND_TCP | CONNECT_TCP
_SCOPE_ALL = 3    # ABSTRACT_UNIX_SOCKET | SIGNAL
READ_ONLY = EXECUTE | READ_FILE | READ_DIR

_libc = None


def _sys():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.syscall.restype = ctypes.c_long
    return _libc.syscall


def abi():
    """The kernel's Landlock ABI version, 0 when unavailable."""
    v = _sys()(_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(_VERSION_FLAG))
    return max(int(v), 0)


def _fs_mask(version):
    return _FS_BY_ABI[min(version, 5)]


def ruleset(read_paths, write_paths, version=None):
    """Build the allow-list once; returns a ruleset fd for `enforce` (reusable across forks)."""
    version = abi() if version is None else version
    if version < 1:
        raise OSError("landlock unavailable")
    fs = _fs_mask(version)
    attr = struct.pack("=Q", fs)
    if version >= 4:
        attr += struct.pack("=Q", _NET_ALL)
    if version >= 6:
        attr += struct.pack("=Q", _SCOPE_ALL)
    buf = ctypes.create_string_buffer(attr, len(attr))
    call = _sys()
    rfd = call(_CREATE, buf, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))
    if rfd < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
    try:
        for path in read_paths:
            _add(call, rfd, path, READ_ONLY)
        for path in write_paths:
            _add(call, rfd, path, fs)
    except OSError:
        os.close(rfd)
        raise
    return rfd


def enforce(rfd):
    """Confine the calling process and its future children (needs no_new_privs first)."""
    if _sys()(_RESTRICT, ctypes.c_int(rfd), ctypes.c_uint32(0)) != 0:
        raise OSError(ctypes.get_errno(), "landlock_restrict_self")


def _add(call, rfd, path, access):
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # a path missing on this machine needs no rule
    try:
        if not os.path.isdir(path):
            # a rule on a file may only carry file rights (truncate and ioctl_dev included)
            access &= EXECUTE | WRITE_FILE | READ_FILE | (3 << 14)
        rule = struct.pack("=Qi", access, fd)
        buf = ctypes.create_string_buffer(rule, len(rule))
        if call(_ADD_RULE, ctypes.c_int(rfd), ctypes.c_int(_RULE_PATH_BENEATH), buf,
                ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), f"landlock_add_rule {path}")
    finally:
        os.close(fd)
