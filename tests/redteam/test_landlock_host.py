"""The landlock tier against its host, as an attacker's job would try it: no signal scoping below
Landlock ABI 6 (the zygote's own `landlock` setting lowered to 5, as on Linux < 6.12), metadata
changes on a host file the sandbox uid owns (chmod, chown, utime, xattrs: Landlock covers none of
them), and a datagram sent by address to a host Unix socket (/dev/log, NOTIFY_SOCKET)."""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import stat
import tempfile

import pytest

from rlvr.verifiers.sandbox import SandboxPool, SandboxUnavailable
from rlvr.verifiers.sandbox.probe import probe


@pytest.fixture(scope="module")
def pool():
    caps = probe("landlock")
    if caps.tier != "landlock":
        pytest.skip(f"tier landlock unavailable here: {caps.reason}")
    with SandboxPool(1, tier="landlock") as p:
        yield p


def _run(pool, code: str) -> str:
    res = pool.run("stdio", {"code": code, "inputs": [""]})
    for line in str(res.get("out", "")).splitlines():
        item = json.loads(line)
        if item[0] == "case":
            return item[2]["out"]
    raise AssertionError(res)


def test_below_abi_6_the_tier_is_refused_naming_why():
    if probe("landlock").tier != "landlock":
        pytest.skip("tier landlock unavailable here")
    with SandboxPool(1, tier="landlock") as p:
        for z in list(p._idle.queue):
            z.caps = dataclasses.replace(z.caps, landlock_abi=5)
        with pytest.raises(SandboxUnavailable, match="tier landlock refused.*ABI >= 6.*ABI 5"):
            p.start()


def test_metadata_of_a_host_file_stays(pool):
    from pathlib import Path

    owner = pool.caps.run_uid if pool.caps.run_uid is not None else os.getuid()
    where = Path(tempfile.mkdtemp(prefix="rlvr-meta-"))     # a path the sandbox uid can reach
    os.chmod(where, 0o755)
    key = where / "key"
    key.write_text("secret")
    os.chmod(key, 0o600)
    os.chown(key, owner, owner)
    before = os.stat(key)
    code = (f"import os\np = {str(key)!r}\nfor name, f in [('chmod', lambda: os.chmod(p, 0o666)),"
            " ('utime', lambda: os.utime(p, (0, 0))), ('chown', lambda: os.chown(p, -1, -1)),"
            " ('xattr', lambda: os.setxattr(p, 'user.x', b'1'))]:\n"
            "    try:\n        f()\n        print(name, 'done')\n    except OSError as e:\n"
            "        print(name, e.errno)\n")
    out = _run(pool, code)
    after = os.stat(key)
    assert "done" not in out, out
    key.unlink()
    where.rmdir()
    assert stat.S_IMODE(after.st_mode) == 0o600 and after.st_mtime_ns == before.st_mtime_ns


def test_no_datagram_reaches_a_host_unix_socket(pool):
    where = tempfile.mkdtemp(prefix="rlvr-devlog-")
    os.chmod(where, 0o755)
    path = os.path.join(where, "log")
    host = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    host.bind(path)
    os.chmod(path, 0o777)
    host.settimeout(0.5)
    try:
        out = _run(pool, f"import socket\ns = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n"
                         f"try:\n    s.sendto(b'<1>forged', {path!r})\n    print('sent')\n"
                         "except OSError as e:\n    print(e.errno)\n")
        with pytest.raises(TimeoutError):
            host.recv(100)
        assert "sent" not in out
    finally:
        host.close()
        os.unlink(path)
        os.rmdir(where)
