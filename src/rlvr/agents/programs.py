"""The two programs a workspace runs inside the sandbox (as `stdio` jobs): the test runner and the
`python` tool. Both read their job (JSON) from stdin and lay the files out in the job's emptied
directory first.

RUNNER guarantees: the workspace directory is searched for imports only after the standard library
(appended to `sys.path`, never inserted), and never for a top-level stdlib name (a finder before
the path finder), so a workspace file named like a stdlib module (`json.py`, `unittest/`, or
`tkinter.py`, which this interpreter may lack) is never imported in its place; the tests run in
this process, and the closing line carries the run's nonce. Not guaranteed: secrecy of the nonce
from agent code that a test imports on purpose (its own module, by a name the standard library
does not have).

PYTHON guarantees, as a monitor (not the protection: the copy never reaches the workspace): the
fixed files (tests and the task's other non-output files) are watched with inotify from before the
agent's code runs, by inode and by name, so an edit undone before the end, a rename, a delete or a
write through a hard link is reported; at the end each fixed path is checked relative to the job
directory (whatever the cwd) with lstat first (anything but a regular file counts as changed),
opened with O_NOFOLLOW | O_NONBLOCK and read at most one byte past its expected length, so a FIFO,
a link or a huge file never blocks or blinds the check. The closing line (one per process that
reaches it, a forked child too) lists what changed. Not guaranteed: a report from code that ends
its own process (`os._exit`, exec, a signal, the job's time limit) or that tampers with this
program's state in its own process (the inotify descriptor, the captured functions).
"""

# The start of both programs: `_write(files)` lays the files out in the job's emptied directory.
_PRELUDE = r"""
import json, os, sys
def _write(files):
    for path, text in files.items():
        d = os.path.dirname(path)
        if d:
            os.makedirs(d, exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
"""

# stdin: {"files", "tests", "nonce"}. The finder sits before the path finder: a stdlib name is looked
# up in the stdlib only, even one this interpreter lacks (tkinter), never in the workspace.
RUNNER = _PRELUDE + r"""
import importlib.machinery
job = json.loads(sys.stdin.read())
os.dup2(os.open(os.devnull, os.O_RDONLY), 0)   # the job (and its nonce) is not read twice
_write(job["files"])
sys.path.append(os.getcwd())
class _StdlibOnly:
    home = os.getcwd()
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if path is not None or name not in sys.stdlib_module_names:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, [p for p in sys.path if p != cls.home])
        if spec is None:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return spec
sys.meta_path.insert(sys.meta_path.index(importlib.machinery.PathFinder), _StdlibOnly)
for name in job["tests"]:
    exec(compile(job["files"][name], name, "exec"), {"__name__": "__main__"})
print("\n" + job["nonce"])
"""

# stdin: {"files", "fixed": {path: text}, "nonce", "code"}. The closing line, tagged with the nonce,
# is a JSON list of the fixed paths that changed ("(watch)" for a change the end state no longer
# shows).
PYTHON = _PRELUDE + r"""
import ctypes, stat, struct
_OS = (os.lstat, os.open, os.read, os.fstat, os.close, os.write)
_HOME = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # the job dir, whatever the cwd
_FILE_EV = 0x2 | 0x8 | 0x400 | 0x800              # modify, close_write, delete_self, move_self
_DIR_EV = 0x40 | 0x80 | 0x100 | 0x200 | 0x400 | 0x800  # moved_from/to, create, delete, *_self
_NOFOLLOW, _ONLYDIR = 0x02000000, 0x01000000

def _watch(paths):
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    wds = {}                   # wd -> None (a fixed file itself) or the fixed names in that dir
    for path in paths if fd >= 0 else ():
        wd = libc.inotify_add_watch(fd, path.encode(), _FILE_EV | _NOFOLLOW)
        if wd >= 0:
            wds[wd] = None
        wd = libc.inotify_add_watch(fd, (os.path.dirname(path) or ".").encode(),
                                    _DIR_EV | _NOFOLLOW | _ONLYDIR)
        if wd >= 0 and wds.get(wd, ()) is not None:
            wds[wd] = set(wds.get(wd, ())) | {os.path.basename(path)}
    return fd, wds

def _seen(fd, wds):
    # True when an event concerns a fixed file (or events were lost: the queue overflowed).
    _, _, read, _, _, _ = _OS
    hit = False
    while fd >= 0:
        try:
            buf = read(fd, 65536)
        except OSError:
            break
        i = 0
        while 0 < len(buf) and i + 16 <= len(buf):
            wd, mask, _, n = struct.unpack_from("iIII", buf, i)
            name = buf[i + 16:i + 16 + n].split(b"\0")[0].decode("utf-8", "replace")
            i += 16 + n
            names = wds.get(wd, ())
            if mask & 0x4000 or (mask & 0x8000 == 0 and (names is None or name in names
                                                         or mask & 0xC00)):
                hit = True
        if not buf:
            break
    return hit

def _differs(path, want):
    lstat, open_, read, fstat, close, _ = _OS
    try:
        if not stat.S_ISREG(lstat(path, dir_fd=_HOME).st_mode):
            return True
        fd = open_(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=_HOME)
        try:
            got = b""
            while stat.S_ISREG(fstat(fd).st_mode) and len(got) <= len(want):
                chunk = read(fd, len(want) + 1 - len(got))
                if not chunk:
                    return got != want
                got += chunk
            return True
        finally:
            close(fd)
    except OSError:
        return True

def _main():
    job = json.loads(sys.stdin.read())
    _write(job["files"])
    fixed, nonce = job["fixed"], job["nonce"]
    code = job.pop("code")
    del job
    sys.stdin = open(os.devnull)
    ifd, wds = _watch(sorted(fixed))
    try:
        exec(compile(code, "<python>", "exec"), {"__name__": "__main__"})
    finally:
        changed = [p for p, text in sorted(fixed.items()) if _differs(p, text.encode())]
        if _seen(ifd, wds) and not changed:
            changed = ["(watch)"]
        try:
            sys.stdout.flush()
        except BaseException:
            pass
        line = ("\n" + nonce + json.dumps(changed) + "\n").encode()
        while line:
            line = line[_OS[5](1, line):]
_main()
"""
