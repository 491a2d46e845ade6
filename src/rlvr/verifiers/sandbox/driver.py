"""What a job runs inside the sandbox, after hardening: the candidate plus test *inputs* only.

Three modes, each writing one JSON line per event to the result fd (never to the candidate's
stdout): `call` loads the candidate and calls its entry point once per case, reporting
`["case", i, ["ok", value] | ["exc", name]]`; `stdio` runs the program once per input in a fresh
forked process with fresh globals, reporting `["case", i, {"out": text, "exc": name|None}]`;
`check` runs a `check(candidate)` test function in this process while the candidate lives in a
forked child reached through a proxy that carries plain values only (the test source arrives as
fd 3 and is read only after that fork, so the candidate's memory never held it), reporting `["check", "pass"]`
or `["check", exception name]`. Expected outputs never come here: whatever this process writes is
compared in the trusted process, so a candidate that forges lines can only hurt itself.
Stdlib only; runs under the system interpreter.
"""

import os
import sys

import codec

_write = os.write
BLOB_FD = 3  # a check job's test source (a memfd from the grader), see zygote._child


def emit(fd, item):
    data = (codec.dumps(item) + "\n").encode()
    while data:
        data = data[_write(fd, data):]


def _load(code, name):
    namespace = {"__name__": name, "__builtins__": __builtins__}
    exec(compile(code, "<candidate>", "exec"), namespace)
    return namespace


def _silence_stdout():
    """Move the result channel off fd 1 so candidate prints cannot interleave with results."""
    res = os.dup(1)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.close(null)
    return res


def run_call(payload):
    res = _silence_stdout()
    try:
        fn = _load(payload["code"], "__candidate__")[payload["entry"]]
        if not callable(fn):
            raise TypeError("entry point is not callable")
    except BaseException as exc:
        emit(res, ["load", type(exc).__name__])
        return
    for i, args in enumerate(payload["args"]):
        try:
            value = fn(*codec.decode(args))
            try:
                out = ["ok", codec.encode(value)]
            except BaseException:  # self-referencing or monstrous values
                out = ["ok", {"bad": "unencodable"}]
        except BaseException as exc:
            out = ["exc", type(exc).__name__]
        emit(res, ["case", i, out])
        if out[0] == "exc" and payload.get("stop_on_exc", True):
            break
    emit(res, ["done"])


def _run_program(code, fd, out_w, res):
    """Grandchild of a stdio job: runs the program as __main__ with the case's stdin (`fd`, a file
    already unlinked: the program never finds its input, a nonce included, in its directory)."""
    os.close(res)
    os.dup2(fd, 0)
    os.dup2(out_w, 1)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    status = 0
    try:
        _load(code, "__main__")
    except SystemExit as exc:
        status = 0 if exc.code in (None, 0) else 1
    except BaseException:
        status = 1
    try:
        sys.stdout.flush()
    except BaseException:
        status = 1
    os._exit(status)


def _read_all(fd, cap):
    chunks, size = [], 0
    while size <= cap:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks), size > cap


def run_stdio(payload):
    res = _silence_stdout()
    cap = int(payload.get("out_cap", 1 << 20))
    compile(payload["code"], "<candidate>", "exec")
    for i, text in enumerate(payload["inputs"]):
        path = f"stdin-{i}"
        with open(path, "w") as f:
            f.write(text)
        fd = os.open(path, os.O_RDONLY)
        os.unlink(path)
        out_r, out_w = os.pipe()
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            os.close(out_r)
            _run_program(payload["code"], fd, out_w, res)
        os.close(out_w)
        os.close(fd)
        data, over = _read_all(out_r, cap)
        os.close(out_r)
        if over:
            os.kill(pid, 9)
        _, status = os.waitpid(pid, 0)
        exc = "OutputLimit" if over else (None if status == 0 else f"exit:{status}")
        emit(res, ["case", i, {"out": data.decode("utf-8", "replace"), "exc": exc}])
    emit(res, ["done"])


def _serve_candidate(code, entry, req_r, resp_w, res):
    """Grandchild of a check job: the candidate answers proxy calls with plain values only.

    It is forked before the test source is read, and closes the source's fd first: the tests and
    their expected values are nowhere in its memory, live or freed.
    """
    os.close(BLOB_FD)
    os.close(res)
    reqs, resps = os.fdopen(req_r, "r"), os.fdopen(resp_w, "w")
    try:
        fn = _load(code, "__candidate__")[entry]
    except BaseException as exc:
        fn, load_error = None, type(exc).__name__
    for line in reqs:
        if fn is None:
            reply = ["exc", load_error]
        else:
            try:
                args, kwargs = codec.decode(codec.loads(line))
                reply = ["ok", codec.encode(fn(*args, **kwargs))]
            except BaseException as exc:
                reply = ["exc", type(exc).__name__]
        try:
            resps.write(codec.dumps(reply) + "\n")
            resps.flush()
        except BaseException:
            break
    os._exit(0)


def _raise_named(name):
    import builtins
    cls = getattr(builtins, name, None)
    if isinstance(cls, type) and issubclass(cls, Exception):
        raise cls("raised by the candidate")
    raise RuntimeError(f"candidate raised {name}")


def _proxy(reqs, resps):
    def candidate(*args, **kwargs):
        reqs.write(codec.dumps(codec.encode((args, kwargs))) + "\n")
        reqs.flush()
        line = resps.readline()
        if not line:
            raise RuntimeError("candidate process died")
        tag, value = codec.loads(line)
        if tag != "ok":
            _raise_named(value)
        return codec.decode(value)
    return candidate


def run_check(payload):
    import ctypes
    res = _silence_stdout()
    req_r, req_w = os.pipe()
    resp_r, resp_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(req_w)
        os.close(resp_r)
        _serve_candidate(payload["code"], payload["entry"], req_r, resp_w, res)
    os.close(req_r)
    os.close(resp_w)
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: the candidate may not peek here
    reqs, resps = os.fdopen(req_w, "w"), os.fdopen(resp_r, "r")
    try:
        with os.fdopen(BLOB_FD, "rb") as f:
            source = f.read().decode()
        namespace = {"__name__": "__check__", "__builtins__": __builtins__}
        exec(compile(source, "<check>", "exec"), namespace)
        candidate = _proxy(reqs, resps)
        # As in a harness that runs tests and solution in one namespace, the entry point's name
        # in the tests means the candidate (HumanEval/33 compares the candidate with itself).
        namespace[payload["entry"]] = candidate
        namespace["check"](candidate)
        verdict = "pass"
    except BaseException as exc:
        verdict = type(exc).__name__
    emit(res, ["check", verdict])
    emit(res, ["done"])


MODES = {"call": run_call, "stdio": run_stdio, "check": run_check}
