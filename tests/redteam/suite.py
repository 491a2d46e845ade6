"""Run the red-team corpus against `CodeVerifier` at one isolation tier and report as JSON.

Usage: `python tests/redteam/suite.py --tier bwrap|landlock [--corpus extra.jsonl [--corpus-only]]`;
the last line of stdout is the JSON report. Runs under any interpreter with the stdlib (the
unprivileged-user test runs it with /usr/bin/python3). For every item it checks: the reward (0 for adversarial items,
1 for controls), the time (at most timeout + 1 s), that no file appeared outside the sandbox and the
secret file is unchanged, that no process the suite started was left behind, that no TCP or UDP
packet reached the listeners on 127.0.0.1, and at the end that the grader still scores a control.
It refuses to run destructive items without an isolation tier. A corpus file holds JSON rows
`{"name", "code", "tests", "hidden_tests"?, "expect": 0|1}` using the same placeholders.
"""

import argparse
import glob
import json
import os
import secrets
import socket
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "src"))
sys.path.insert(0, HERE)
if os.environ.get("RLVR_BWRAP_SITE"):
    sys.path.append(os.environ["RLVR_BWRAP_SITE"])

import items  # noqa: E402
from rlvr.types import Problem  # noqa: E402
from rlvr.verifiers.code import CodeSpec, CodeVerifier  # noqa: E402

SECRET_ENV = "RLVR_REDTEAM_SECRET"


class Context:
    """Host-side bait and tripwires for one suite run."""

    def __init__(self):
        self.token = "rt-" + secrets.token_hex(16)
        self.name = "rlvr-redteam-" + secrets.token_hex(6)
        self.secret_dir = tempfile.mkdtemp(prefix="rlvr-secret-")
        os.chmod(self.secret_dir, 0o755)
        self.secret_file = os.path.join(self.secret_dir, "hidden_tests.json")
        with open(self.secret_file, "w") as f:
            f.write(self.token)
        os.chmod(self.secret_file, 0o666)
        os.environ[SECRET_ENV] = self.token
        # A host directory the sandbox's uid owns: a cleanup that follows a job's link would chmod it.
        self.bait_dir = tempfile.mkdtemp(prefix="rlvr-bait-")
        run_uid = probe_run_uid()
        if run_uid is not None:
            os.chown(self.bait_dir, run_uid, run_uid)
        os.chmod(self.bait_dir, 0o755)
        self.sent = f"/tmp/{self.name}-"
        self.tcp = socket.socket()
        self.tcp.bind(("127.0.0.1", 0))
        self.tcp.listen(16)
        self.tcp.setblocking(False)
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.udp.setblocking(False)

    def fill(self, text):
        for key, value in (("@PORT@", self.tcp.getsockname()[1]), ("@UDP@", self.udp.getsockname()[1]),
                           ("@SENT@", self.sent), ("@SECRET_FILE@", self.secret_file),
                           ("@SECRET_ENV@", SECRET_ENV), ("@NAME@", self.name), ("@TOKEN@", self.token),
                           ("@BAIT_DIR@", self.bait_dir)):
            text = text.replace(key, str(value))
        return text

    def escapes(self, workdirs):
        found = glob.glob(self.sent + "*")
        found += [p for p in (f"/var/tmp/{self.name}", f"/usr/{self.name}", f"/dev/shm/{self.name}",
                              f"/tmp/{self.name}", os.path.expanduser(f"~/{self.name}"))
                  if os.path.lexists(p)]
        for d in workdirs:  # each holds only the zygote's job dir, empty between jobs
            job = os.path.join(d, "job")
            found += [os.path.join(d, n) for n in os.listdir(d) if n != "job"]
            found += [os.path.join(job, n) for n in os.listdir(job)] if os.path.isdir(job) else []
        with open(self.secret_file) as f:
            if f.read() != self.token:
                found.append(self.secret_file + " (modified)")
        if os.stat(self.bait_dir).st_mode & 0o7777 != 0o755 or os.listdir(self.bait_dir):
            found.append(self.bait_dir + " (modified)")
        return found

    def connections(self):
        hits = []
        try:
            conn, _ = self.tcp.accept()
            conn.close()
            hits.append("tcp")
        except BlockingIOError:
            pass
        try:
            self.udp.recvfrom(100)
            hits.append("udp")
        except BlockingIOError:
            pass
        return hits

    def clean(self, found):
        """Remove what escaped so that the next item is judged on its own."""
        for path in found:
            if path == self.bait_dir + " (modified)":
                os.chmod(self.bait_dir, 0o755)
                for name in os.listdir(self.bait_dir):
                    os.unlink(os.path.join(self.bait_dir, name))
            elif path.endswith("(modified)"):
                with open(self.secret_file, "w") as f:
                    f.write(self.token)
            elif os.path.isdir(path):
                import shutil
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.unlink(path)

    def close(self):
        self.clean(self.escapes([]))
        self.tcp.close()
        self.udp.close()
        os.unlink(self.secret_file)
        os.rmdir(self.secret_dir)
        os.rmdir(self.bait_dir)


def probe_run_uid():
    """The uid the sandbox runs jobs as (None: this process's own)."""
    from rlvr.verifiers.sandbox.probe import probe
    return probe().run_uid


def pids_of(uid):
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/status") as f:
                    for line in f:
                        if line.startswith("Uid:"):
                            if int(line.split()[1]) == uid:
                                found.add(int(entry))
                            break
            except OSError:
                pass
    return found


def _parents():
    """{pid: parent pid} of every process on the machine, from /proc/PID/stat."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()   # the name may hold spaces and ")"
            if fields[0] != "Z":                            # a zombie runs nothing
                parents[int(entry)] = int(fields[1])
    return parents


def started_here(root=None):
    """The live processes descended from `root` (this process): what this suite started, through
    the pool and each zygote (a child subreaper, so a job's orphans come back to it; under bwrap
    the tree also stays in its pid namespace). Never other processes of the same uid: the sandbox
    uid (nobody, when the grader is root) is shared with whatever else runs on the machine."""
    root = os.getpid() if root is None else root
    children = {}
    for pid, ppid in _parents().items():
        children.setdefault(ppid, []).append(pid)
    found, todo = set(), [root]
    while todo:
        kids = children.get(todo.pop(), [])
        found.update(kids)
        todo += kids
    return found


class Subreaper:
    """This process as a child subreaper while the suite runs (PR_SET_CHILD_SUBREAPER): a job's
    orphan whose zygote died comes back to this process, not to init, so `started_here` still
    sees it. On exit the previous setting comes back and adopted orphans that ended are reaped
    (the pool's own children are waited by the pool, and were not children here before)."""

    def __enter__(self):
        import ctypes
        self.libc = ctypes.CDLL(None, use_errno=True)
        was = ctypes.c_int(0)
        self.libc.prctl(37, ctypes.byref(was), 0, 0, 0)         # PR_GET_CHILD_SUBREAPER
        self.was = was.value
        self.before = {pid for pid, ppid in _parents().items() if ppid == os.getpid()}
        self.libc.prctl(36, 1, 0, 0, 0)                         # PR_SET_CHILD_SUBREAPER
        return self

    def __exit__(self, *exc):
        self.libc.prctl(36, self.was, 0, 0, 0)
        for entry in os.listdir(f"/proc/{os.getpid()}/task"):
            try:
                with open(f"/proc/{os.getpid()}/task/{entry}/children") as f:
                    kids = [int(k) for k in f.read().split()]
            except OSError:
                continue
            for pid in set(kids) - self.before:
                try:
                    os.waitpid(pid, os.WNOHANG)                 # only if it already ended
                except ChildProcessError:
                    pass
        return False


def leftover_processes(baseline, grace_s=1.0):
    """How many more processes this suite's tree holds than `baseline` (the tree with the pool
    started and idle), after up to `grace_s` for a job's processes to go."""
    end = time.monotonic() + grace_s
    while True:
        extra = len(started_here()) - len(baseline)
        if extra <= 0 or time.monotonic() > end:
            return max(extra, 0)
        time.sleep(0.02)


def load_items(ctx, corpus, builtin=True):
    rows = []
    groups = (("adversarial", items.ADVERSARIAL), ("control", items.CONTROLS)) if builtin else ()
    for kind, group in groups:
        for name, problem, code in group:
            visible, hidden = items.PROBLEMS[problem]
            rows.append({"name": name, "kind": kind, "code": code, "tests": visible,
                         "hidden_tests": hidden, "expect": 0 if kind == "adversarial" else 1})
    if corpus:
        with open(corpus) as f:
            for line in f:
                if line.strip():
                    row = json.loads(line)
                    row.setdefault("kind", "adversarial" if row["expect"] == 0 else "control")
                    rows.append(row)
    for row in rows:
        row["code"] = ctx.fill(row["code"])
        row["tests"] = json.loads(ctx.fill(json.dumps(row["tests"])))
        if row.get("hidden_tests") is not None:
            row["hidden_tests"] = json.loads(ctx.fill(json.dumps(row["hidden_tests"])))
    return rows


def run_item(verifier, ctx, row, baseline, timeout_s):
    meta = {"hidden_tests": row["hidden_tests"]} if row.get("hidden_tests") is not None else {}
    problem = Problem(row["name"], "", row["tests"], "code", meta)
    start = time.monotonic()
    score = verifier.score_batch(["```python\n" + row["code"] + "\n```"], [problem])[0]
    secs = time.monotonic() - start
    problems = []
    if score.reward != row["expect"]:
        problems.append(f"reward {score.reward} (flags {list(score.flags)})")
    if secs > timeout_s + 1.0:
        problems.append(f"took {secs:.2f}s")
    escaped = ctx.escapes(verifier.pool.workdirs())
    ctx.clean(escaped)
    problems += [f"file {p}" for p in escaped]
    extra = leftover_processes(baseline)
    if extra:
        problems.append(f"{extra} processes left")
    problems += [f"{c} connection" for c in ctx.connections()]
    return {"name": row["name"], "kind": row["kind"], "reward": score.reward,
            "flags": list(score.flags), "secs": round(secs, 3), "problems": problems}


# Items that harm nothing when run with no isolation: used to show that the tripwires fire.
HARMLESS = {"read_secret_file", "write_outside_workdir", "environment_secret", "control_add"}


def run_suite(tier, timeout_s=1.0, corpus=None, only=None, builtin=True):
    """Run the corpus (or the `only` names) at `tier`; see the module docstring."""
    unsafe = tier not in ("bwrap", "landlock")
    if unsafe and not (only and set(only) <= HARMLESS):
        raise SystemExit("refusing to run destructive items without an isolation tier")
    with Subreaper():
        return _run_suite(tier, timeout_s, corpus, only, builtin, unsafe)


def _run_suite(tier, timeout_s, corpus, only, builtin, unsafe):
    ctx = Context()
    verifier = CodeVerifier(CodeSpec(tier=tier, timeout_s=timeout_s, mem_mb=512, workers=2,
                                     allow_unsafe=unsafe))
    try:
        verifier.pool.start()
        baseline = started_here()
        started = time.monotonic()
        results = [run_item(verifier, ctx, row, baseline, timeout_s)
                   for row in load_items(ctx, corpus, builtin)
                   if only is None or row["name"] in only]
        alive = run_item(verifier, ctx, {"name": "grader_alive", "kind": "control",
                                         "code": "def add(a, b):\n    return b + a\n",
                                         "tests": items.ADD_VISIBLE, "hidden_tests": items.ADD_HIDDEN,
                                         "expect": 1}, baseline, timeout_s)
        results.append(alive)
        total_s = time.monotonic() - started
    finally:
        host_dirs = [verifier.pool._sbxdir] + verifier.pool.workdirs()
        cgroups = [str(d) for z in list(verifier.pool._idle.queue) for d in z.cgroups]
        verifier.close()
        ctx.close()
    left = [p for p in host_dirs + cgroups if os.path.exists(p)]
    results.append({"name": "teardown", "kind": "control", "reward": 1.0, "flags": [], "secs": 0,
                    "problems": [f"left behind {p}" for p in left]})
    return summarize(tier, results, total_s)


def summarize(tier, results, total_s):
    def count(kind, ok=None):
        return sum(r["kind"] == kind and (ok is None or not r["problems"]) for r in results)
    return {"tier": tier, "uid": os.getuid(), "adversarial": count("adversarial"),
            "adversarial_ok": count("adversarial", True), "controls": count("control"),
            "controls_ok": count("control", True), "secs": round(total_s, 1),
            "failures": [r for r in results if r["problems"]],
            "slowest": sorted(results, key=lambda r: -r["secs"])[:3]}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tier", required=True, choices=["bwrap", "landlock"])
    parser.add_argument("--timeout", type=float, default=1.0)
    parser.add_argument("--corpus", default=None, help="extra items, one JSON row per line")
    parser.add_argument("--corpus-only", action="store_true", help="skip the built-in items")
    parser.add_argument("--only", nargs="+", default=None, help="run these item names only")
    parser.add_argument("--busy-threads", type=int, default=0,
                        help="hold this many idle threads first, as a trainer and its servers "
                             "sharing the grader's uid would")
    args = parser.parse_args(argv)
    hold = threading.Event()
    for _ in range(args.busy_threads):
        threading.Thread(target=hold.wait, daemon=True).start()
    report = run_suite(args.tier, args.timeout, args.corpus, only=args.only,
                       builtin=not args.corpus_only)
    hold.set()
    print(json.dumps(report))
    return 0 if not report["failures"] else 1


if __name__ == "__main__":
    sys.exit(main())
