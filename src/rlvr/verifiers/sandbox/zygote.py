"""The zygote: a long-lived sandboxed process that forks one hardened job at a time.

Started by the pool as `python3 -I -S zygote.py CONFIG` (inside bwrap, or bare in the fallback
tier); stdlib only. Protocol: one JSON object per line on stdin (a job), one JSON object per line
on stdout (its result); a job with `stream` set also has each result line forwarded as
`{"ev": line}` while it runs, and a `stop` line from the grader kills it early (first failure,
binary reward). Per job it forks a child that starts a new session, enters the (emptied) work
directory, clears the environment, applies rlimits, Landlock (when available; the ruleset is
built once), closes every inherited descriptor and installs the seccomp filter (which needs
no_new_privs, set first), then runs the driver. The zygote enforces the wall deadline through a
pidfd and the CPU budget through RLIMIT_CPU and rusage, caps output, and afterwards kills every
leftover process: `kill(-1)` inside a pid namespace, otherwise a freeze-then-kill walk of its
descendants (it is a child subreaper, so orphans come back to it); then it empties the work
directory with `wipe` (no link followed, any depth, never raises) and marks the result `dirty`
when something stayed, so that the pool replaces it before the next job. Not guaranteed: anything the
kernel or the outer layers (bwrap, uid, cgroups) do not enforce.
"""

import json
import os
import resource
import select
import signal
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import codec  # noqa: E402
import diskwatch  # noqa: E402
import driver  # noqa: E402
import landlock  # noqa: E402
import seccomp  # noqa: E402
import wipe  # noqa: E402

# Modules every job may use, imported once before forking. Kept small on purpose: each one makes
# every fork dearer (page tables, copy-on-write), and most jobs import little.
PRELOAD = ("ctypes", "json", "math", "re", "collections", "itertools", "functools", "heapq",
           "bisect", "string", "operator", "copy")
CLEANUP_S = 1.0   # emptying the job dir past this: the result goes back marked dirty instead


def _preload():
    for name in PRELOAD:
        try:
            __import__(name)
        except ImportError:
            pass


_libc = None


def _prctl(option, arg):
    global _libc
    if _libc is None:
        import ctypes
        _libc = ctypes.CDLL(None, use_errno=True)
    _libc.prctl(option, arg, 0, 0, 0)


def _cpu_budget(job):
    return float(job.get("cpu_s") or job["timeout_s"])


def _limits(job):
    mem = int(job["mem_mb"]) << 20
    cpu = max(1, int(-(-_cpu_budget(job) // 1)))
    limits = [(resource.RLIMIT_AS, mem), (resource.RLIMIT_FSIZE, 16 << 20),
              (resource.RLIMIT_NOFILE, 64), (resource.RLIMIT_CORE, 0),
              (resource.RLIMIT_STACK, 64 << 20)]
    # RLIMIT_NPROC counts every task (threads too) of the real uid in this user namespace: a
    # non-root grader shares its uid with the trainer, the servers and the shell, so a bare
    # `nproc` made every fork fail once they held that many threads (each code reward a silent
    # crash). The job gets `nproc` beyond what the uid runs now. The pool sends 0 when its
    # cgroup's pids ceiling bounds this tree instead.
    if int(job["nproc"]) > 0:
        limits.append((resource.RLIMIT_NPROC, _uid_tasks() + int(job["nproc"])))
    for res, value in limits:
        resource.setrlimit(res, (value, value))
    # SIGXCPU at the budget, SIGKILL a second later for a job that ignores it.
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))


def _uid_tasks():
    """Tasks (threads included) of this real uid that /proc shows: the count RLIMIT_NPROC meets."""
    uid, total = os.getuid(), 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status", "rb") as f:
                fields = dict(line.split(b":", 1) for line in f if b":" in line)
            if int(fields[b"Uid"].split()[0]) == uid:
                total += int(fields[b"Threads"])
        except (OSError, KeyError, ValueError):
            continue   # gone meanwhile, or not ours to read
    return total


def _over_cpu(job, status, cpu):
    """Time limit exceeded on CPU time: spent the budget, or killed by the CPU rlimit."""
    sig = -os.waitstatus_to_exitcode(status)
    return cpu > _cpu_budget(job) or (sig in (signal.SIGXCPU, signal.SIGKILL)
                                      and cpu >= 0.9 * int(-(-_cpu_budget(job) // 1)))


def _child(cfg, job, out_w, err_w, blob_fd):
    try:
        os.setsid()
        jobdir = cfg["jobdir"]
        os.chdir(jobdir)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        os.environ.clear()
        os.environ.update(PATH="/usr/bin:/bin", HOME=jobdir, TMPDIR=jobdir, LANG="C.UTF-8")
        _limits(job)
        os.nice(int(job.get("nice", 0)))  # > 0 puts jobs below the zygote and the grader
        _prctl(38, 1)  # PR_SET_NO_NEW_PRIVS, required before unprivileged Landlock and seccomp
        if cfg["ruleset"] is not None:
            landlock.enforce(cfg["ruleset"])
        keep = 3
        if blob_fd is not None:
            os.dup2(blob_fd, 3)  # the test source, read by the driver only after it forks
            keep = 4
        os.closerange(keep, 1 << 16)  # protocol pipes, ruleset, socket: nothing else is inherited
        seccomp.install(cfg["filter"])
        driver.MODES[job["mode"]](job["payload"])
        os._exit(0)
    except BaseException as exc:
        try:
            os.write(2, f"driver: {type(exc).__name__}: {exc}".encode()[-2000:])
        finally:
            os._exit(70)


def _drain(fd, buf, cap):
    """Read what is available; returns False at EOF. Bytes past `cap` are counted, not kept."""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            return True
        if not chunk:
            return False
        buf[1] += len(chunk)
        if len(buf[0]) < cap:
            buf[0] += chunk[: cap - len(buf[0])]


class Channel:
    """The line protocol with the grader over raw fds (we select on them, so no buffered files)."""

    def __init__(self, rfd, wfd):
        self.rfd, self.wfd, self.buf = rfd, wfd, b""

    def send(self, obj):
        data = (codec.dumps(obj) + "\n").encode()
        while data:
            data = data[os.write(self.wfd, data):]

    def feed(self):
        chunk = os.read(self.rfd, 1 << 20)
        if not chunk:
            raise SystemExit(0)  # the grader is gone
        self.buf += chunk

    def take_stop(self):
        """Consume pending `stop` lines; True if there was one."""
        lines = self.buf.split(b"\n")
        keep = [ln for ln in lines[:-1] if ln.strip() != b"stop"]
        found = len(keep) < len(lines) - 1
        self.buf = b"".join(ln + b"\n" for ln in keep) + lines[-1]
        return found

    def next_job(self):
        while True:
            self.take_stop()  # a stop that raced with the end of its job
            if b"\n" in self.buf:
                line, _, self.buf = self.buf.partition(b"\n")
                return json.loads(line)
            self.feed()


def _forward(chan, out, sent):
    """Stream complete result lines to the grader; returns the new forwarded offset."""
    end = out[0].rfind(b"\n") + 1
    for line in out[0][sent:end].splitlines():
        chan.send({"ev": line.decode("utf-8", "replace")})
    return max(end, sent)


def _wait(fds, deadline, disk):
    """(a final state or None, the ready fds): the deadline passed, the job directory is over its
    bound, or select returned (by the next measurement at the latest when the directory is watched)."""
    now = time.monotonic()
    remaining = deadline - now
    if remaining <= 0:
        return "timeout", []
    if disk is not None and disk.over(now):
        return "output_limit", []
    ready, _, _ = select.select(fds, [], [], remaining if disk is None
                                else disk.timeout(time.monotonic(), remaining))
    return None, ready


def _supervise(pidfd, out_r, err_r, deadline, cap, chan, disk=None):
    """Wait for the job, forwarding its output; `disk` is a `diskwatch.DiskWatch` where the job
    directory is on the host's disk."""
    out, err, sent = [b"", 0], [b"", 0], 0
    fds = [pidfd, out_r, err_r] + ([chan.rfd] if chan else [])
    while True:
        state, ready = _wait(fds, deadline, disk)
        if state:
            return state, out, err
        for fd, buf, cap_ in ((out_r, out, cap), (err_r, err, 4096)):
            if fd in ready and not _drain(fd, buf, cap_):
                fds.remove(fd)
        if out[1] > cap or err[1] > cap:
            return "output_limit", out, err
        if chan:
            sent = _forward(chan, out, sent)
            if chan.rfd in ready:
                chan.feed()
                if chan.take_stop():
                    return "stopped", out, err
        if pidfd in ready:
            _drain(out_r, out, cap) if out_r in fds else None
            _drain(err_r, err, 4096) if err_r in fds else None
            return ("output_limit" if out[1] > cap else "exit"), out, err


def _descendants():
    found, todo = [], [os.getpid()]
    while todo:
        pid = todo.pop()
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    kids = [int(k) for k in f.read().split()]
                found += kids
                todo += kids
        except OSError:
            continue
    return found


def _signal_job(pidns):
    """SIGKILL all of the job's pid namespace; without one, stop then kill every descendant (stopped
    first, so none forks between being listed and being killed)."""
    if pidns:
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return
    pids = _descendants()
    for sig in (signal.SIGSTOP, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass


def _kill_all(pidns, job_pid):
    """Kill everything the job left (the job too), freezing first; reap until no child remains.

    Returns the job's (status, rusage) when it was reaped here, else None.
    """
    job, end = None, time.monotonic() + 2.0
    while time.monotonic() < end:
        _signal_job(pidns)
        try:
            while True:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
                if pid == 0:
                    break
                if pid == job_pid:
                    job = (status, usage)
        except ChildProcessError:
            return job
        time.sleep(0.001)
    return job


def _receive_blob(cfg):
    """The memfd the grader sent for this job (its content is never read here)."""
    _, fds, _, _ = socket.recv_fds(cfg["sock"], 16, 1)
    if not fds:
        raise SystemExit("grader promised a blob and sent none")
    return fds[0]


def run_job(cfg, job, chan):
    blob_fd = _receive_blob(cfg) if job.get("blob") else None
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        _child(cfg, job, out_w, err_w, blob_fd)
    os.close(out_w)
    os.close(err_w)
    if blob_fd is not None:
        os.close(blob_fd)
    os.set_blocking(out_r, False)
    os.set_blocking(err_r, False)
    pidfd = os.pidfd_open(pid)
    cap = int(job["out_cap"])
    disk = None if cfg["pidns"] else diskwatch.DiskWatch(cfg["jobdir"], int(cfg["disk_mb"]) << 20)
    state, out, err = _supervise(pidfd, out_r, err_r, start + float(job["timeout_s"]), cap,
                                 chan if job.get("stream") else None, disk)
    if state == "exit" and disk is not None and diskwatch.over_disk(disk.path, disk.cap):
        state = "output_limit"
    wall = time.monotonic() - start
    if state == "exit":
        _, status, usage = os.wait4(pid, 0)
        _kill_all(cfg["pidns"], pid)
    else:
        reaped = _kill_all(cfg["pidns"], pid)
        status, usage = reaped or os.wait4(pid, 0)[1:]
    for fd in (pidfd, out_r, err_r):
        os.close(fd)
    # The job shaped this tree (modes, links, depth): `wipe` is never steered by it. What it
    # cannot remove would reach the next job, so the pool replaces this zygote instead.
    clean = wipe.empty(cfg["jobdir"], CLEANUP_S)
    cpu = usage.ru_utime + usage.ru_stime
    if state == "exit" and _over_cpu(job, status, cpu):
        state = "timeout"
    return {"status": state, "code": os.waitstatus_to_exitcode(status), "wall": wall,
            "cleanup": time.monotonic() - start - wall,
            "cpu": cpu, "out": out[0].decode("utf-8", "replace"),
            "err": err[0].decode("utf-8", "replace")[-2000:], "dirty": not clean}


SIGNAL_SCOPED_ABI = 6   # LANDLOCK_SCOPE_SIGNAL: below it nothing scopes a job's kill() by domain


def main():
    cfg = json.loads(sys.argv[1])
    proto_in, proto_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):
        os.dup2(null, fd)
    _prctl(4, 0)   # PR_SET_DUMPABLE 0: jobs cannot ptrace or read the zygote's memory
    _prctl(36, 1)  # PR_SET_CHILD_SUBREAPER: orphaned job descendants come back to us
    _preload()
    cfg["landlock"] = min(cfg.get("landlock", 0), landlock.abi())
    chan = Channel(proto_in, proto_out)
    if cfg.get("tier") == "landlock" and cfg["landlock"] < SIGNAL_SCOPED_ABI:
        chan.send({"refused": f"the landlock tier needs Landlock ABI >= {SIGNAL_SCOPED_ABI} (Linux "
                              f"6.12) to keep a job's signals in its own domain; here ABI "
                              f"{cfg['landlock']}: a job could kill sibling zygotes and signal every "
                              "process of the grader's uid. Use the bwrap tier or a newer kernel"})
        return
    cfg["jobdir"] = os.path.join(cfg["workdir"], "job")
    os.mkdir(cfg["jobdir"], 0o700)
    cfg["ruleset"] = None
    if cfg["landlock"] >= 1:
        cfg["ruleset"] = landlock.ruleset(cfg["read_paths"], [cfg["jobdir"], os.devnull],
                                          cfg["landlock"])
    cfg["sock"] = socket.socket(fileno=cfg["blob_sock"])
    cfg["filter"] = seccomp.compile_filter([os.getpid(), os.getppid(), cfg["grader_pid"], 1],
                                           confine_host=not cfg["pidns"])
    chan.send({"ready": os.getpid(), "landlock": cfg["landlock"]})
    while True:
        chan.send(run_job(cfg, chan.next_job(), chan))


if __name__ == "__main__":
    main()
