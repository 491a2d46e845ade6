"""A host without /dev/full (as some containers ship): bwrap's `--dev` failed there (`Can't bind
mount /oldroot/dev/full`) and the default tier fell back to landlock without a word. Simulated in a
private mount namespace whose /dev holds every node but `full`; the probe must still pick bwrap
and a job must run in it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

SCRIPT = """
from rlvr.verifiers.sandbox import SandboxPool, probe
import os
assert not os.path.exists('/dev/full')
caps = probe()
print('tier', caps.tier, caps.reason)
with SandboxPool(1, tier='bwrap') as pool:
    print(pool.run('stdio', {'code': 'print(6 * 7)', 'inputs': ['']})['out'])
"""

NODES = {"null": (1, 3), "zero": (1, 5), "random": (1, 8), "urandom": (1, 9), "tty": (5, 0)}


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root and unshare")
def test_the_bwrap_tier_runs_on_a_host_without_dev_full():
    make = " && ".join(f"mknod -m 666 /dev/{n} c {a} {b}" for n, (a, b) in NODES.items())
    shell = (f"mount -t tmpfs none /dev && {make} && ln -s /proc/self/fd /dev/fd && "
             f"exec {sys.executable} -c \"$0\"")
    done = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", shell, SCRIPT],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "tier bwrap" in done.stdout and '"out":"42\\n"' in done.stdout, done.stdout + done.stderr
