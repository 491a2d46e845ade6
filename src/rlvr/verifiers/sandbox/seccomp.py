"""A seccomp deny-list written as raw classic BPF, installed with prctl (stdlib + ctypes only).

Runs inside the sandbox, in each job process right before the untrusted code. It denies what a
test program never needs and what would let it leave or harm the sandbox: ptrace and cross-process
memory access, mounts and namespaces (including clone with namespace flags; clone3 answers ENOSYS
so that libc falls back to clone, whose flags we can inspect), BPF, perf, io_uring, keyrings,
userfaultfd, module and kexec loading, every socket family but AF_UNIX, connect/bind/listen, and
signals to the protected pids (the zygote, the grader) or to every process at once (`kill(-1)`).
The table is x86_64 only: on any other architecture, or for x32 syscalls, the filter kills the
process, so the sandbox fails closed rather than open. Not a complete policy on its own: it is one
layer under namespaces or Landlock, rlimits and `no_new_privs`.
"""

import ctypes
import errno
import struct

AUDIT_ARCH_X86_64 = 0xC000003E
RET_KILL_PROCESS = 0x80000000
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000

NR = {
    "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "mount": 165,
    "umount2": 166, "pivot_root": 155, "chroot": 161, "unshare": 272, "setns": 308, "bpf": 321,
    "perf_event_open": 298, "io_uring_setup": 425, "io_uring_enter": 426,
    "io_uring_register": 427, "keyctl": 250, "add_key": 248, "request_key": 249,
    "userfaultfd": 323, "kexec_load": 246, "kexec_file_load": 320, "init_module": 175,
    "finit_module": 313, "delete_module": 176, "pidfd_getfd": 438, "pidfd_send_signal": 424,
    "personality": 135, "swapon": 167, "swapoff": 168, "reboot": 169, "acct": 163,
    "settimeofday": 164, "name_to_handle_at": 303, "open_by_handle_at": 304,
    "fanotify_init": 300, "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431,
    "fsmount": 432, "fspick": 433, "mount_setattr": 442, "quotactl": 179, "iopl": 172,
    "ioperm": 173, "kcmp": 312, "vhangup": 153, "connect": 42, "bind": 49, "listen": 50,
}
# Without a mount namespace (the landlock tier) Landlock does not cover metadata: mode, owner,
# times and xattrs of any file the job's uid owns, anywhere; nor datagrams sent by address to a
# host Unix socket (/dev/log, NOTIFY_SOCKET). `confine_host=True` denies them.
HOST_META = {
    "chmod": 90, "fchmod": 91, "fchmodat": 268, "fchmodat2": 452, "chown": 92, "fchown": 93,
    "lchown": 94, "fchownat": 260, "utime": 132, "utimes": 235, "futimesat": 261, "utimensat": 280,
    "setxattr": 188, "lsetxattr": 189, "fsetxattr": 190, "removexattr": 197, "lremovexattr": 198,
    "fremovexattr": 199, "sendmsg": 46, "sendmmsg": 307,
}
SENDTO = 44
SOCKET, CLONE, CLONE3, KILL, TKILL, TGKILL = 41, 56, 435, 62, 200, 234
AF_UNIX = 1
CLONE_NEW_ANY = 0x7E020000  # NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET

_LD_ABS, _JEQ, _JSET, _JGE, _RET = 0x20, 0x15, 0x45, 0x35, 0x06
_OFF_NR, _OFF_ARCH, _OFF_ARG = 0, 4, 16


def _stmt(code, k):
    return (code, 0, 0, k)


def _jump(code, k, jt, jf):
    return (code, jt, jf, k)


def _arg_lo(i):
    return _stmt(_LD_ABS, _OFF_ARG + 8 * i)


def _deny_if_arg_in(nr, arg, values, err):
    """Block: when the syscall is `nr` and arg's low 32 bits equal any of `values`, return -err."""
    values = [v & 0xFFFFFFFF for v in values]
    n = len(values)
    prog = [_jump(_JEQ, nr, 0, n + 3), _arg_lo(arg)]
    for i, v in enumerate(values):
        prog.append(_jump(_JEQ, v, n - i, 0))
    prog += [_stmt(_RET, RET_ALLOW), _stmt(_RET, RET_ERRNO | err)]
    return prog


def build_filter(protected_pids=(), confine_host=False):
    """The filter as a list of (code, jt, jf, k) tuples; `protected_pids` may not be signalled;
    `confine_host`: also deny `HOST_META` and `sendto` with an address (the landlock tier)."""
    eperm = errno.EPERM
    prog = [
        _stmt(_LD_ABS, _OFF_ARCH), _jump(_JEQ, AUDIT_ARCH_X86_64, 1, 0),
        _stmt(_RET, RET_KILL_PROCESS),
        _stmt(_LD_ABS, _OFF_NR), _jump(_JGE, 0x40000000, 0, 1), _stmt(_RET, RET_KILL_PROCESS),
    ]
    denied = set(NR.values()) | (set(HOST_META.values()) if confine_host else set())
    for nr in sorted(denied):
        prog += [_jump(_JEQ, nr, 0, 1), _stmt(_RET, RET_ERRNO | eperm)]
    prog += [_jump(_JEQ, CLONE3, 0, 1), _stmt(_RET, RET_ERRNO | errno.ENOSYS)]
    prog += [_jump(_JEQ, CLONE, 0, 4), _arg_lo(0), _jump(_JSET, CLONE_NEW_ANY, 0, 1),
             _stmt(_RET, RET_ERRNO | eperm), _stmt(_RET, RET_ALLOW)]
    prog += [_jump(_JEQ, SOCKET, 0, 4), _arg_lo(0), _jump(_JEQ, AF_UNIX, 1, 0),
             _stmt(_RET, RET_ERRNO | errno.EAFNOSUPPORT), _stmt(_RET, RET_ALLOW)]
    if confine_host:   # sendto(fd, buf, len, flags, addr, addrlen): an address given
        prog += [_jump(_JEQ, SENDTO, 0, 6), _arg_lo(4), _jump(_JEQ, 0, 0, 2),
                 _stmt(_LD_ABS, _OFF_ARG + 8 * 4 + 4), _jump(_JEQ, 0, 1, 0),
                 _stmt(_RET, RET_ERRNO | eperm), _stmt(_RET, RET_ALLOW)]
    pids = [p for p in protected_pids if p > 0]
    prog += _deny_if_arg_in(KILL, 0, [-1] + pids + [-p for p in pids], eperm)
    if pids:
        prog += _deny_if_arg_in(TKILL, 0, pids, eperm)
        prog += _deny_if_arg_in(TGKILL, 0, pids, eperm)
    prog.append(_stmt(_RET, RET_ALLOW))
    return prog


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def compile_filter(protected_pids=(), confine_host=False):
    """The filter as the raw bytes of a sock_filter array (build once, install per job)."""
    return b"".join(struct.pack("=HBBI", *ins) for ins in build_filter(protected_pids, confine_host))


def install(raw):
    """Set no_new_privs and load a compiled filter into the calling single-threaded process."""
    buf = ctypes.create_string_buffer(raw, len(raw))
    fprog = _SockFprog(len(raw) // 8, ctypes.cast(buf, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS failed")
    if libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) != 0:  # PR_SET_SECCOMP, MODE_FILTER
        raise OSError(ctypes.get_errno(), "PR_SET_SECCOMP failed")
