"""Where the vLLM servers' files go: shared memory when it has room, the disk when it has not (said
in the log), and what a run killed at once left in shared memory removed by the next one."""

import logging
import os
import shutil
import subprocess
import tempfile

import pytest

from rlvr.rollout.vllm.transport import DIR_PREFIX, weights_dir


@pytest.fixture
def shm():
    """A directory standing for /dev/shm (a tmpfs of 128 MiB when root can mount one)."""
    path = tempfile.mkdtemp(prefix="rlvr-test-shm-")
    mounted = os.geteuid() == 0 and subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=128m", "tmpfs", path], capture_output=True).returncode == 0
    yield path
    if mounted:
        subprocess.run(["umount", path], check=True)
    shutil.rmtree(path, ignore_errors=True)


def test_full_shared_memory_falls_back_to_disk_with_a_warning(shm, caplog):
    need = shutil.disk_usage(shm).free   # three copies of this cannot fit
    with caplog.at_level(logging.WARNING, logger="rlvr.rollout.vllm.transport"):
        path = weights_dir(need, shm)
    try:
        assert os.path.dirname(path) == tempfile.gettempdir()
        assert f"{shm} has" in caplog.text and "--shm-size" in caplog.text
    finally:
        os.rmdir(path)
    small = weights_dir(1 << 20, shm)
    assert os.path.dirname(small) == shm
    assert os.path.basename(small).startswith(f"{DIR_PREFIX}{os.getpid()}-")


def test_directories_of_gone_runs_are_swept(shm):
    gone = subprocess.Popen(["true"])
    gone.wait()
    stale = os.path.join(shm, f"{DIR_PREFIX}{gone.pid}-abc")
    alive = os.path.join(shm, f"{DIR_PREFIX}{os.getpid()}-def")
    unrelated = os.path.join(shm, f"{DIR_PREFIX}12345678")   # no pid field: not ours to judge
    for d in (stale, alive, unrelated):
        os.makedirs(os.path.join(d, "model"))
    path = weights_dir(1 << 10, shm)
    try:
        assert not os.path.exists(stale)
        assert os.path.isdir(alive) and os.path.isdir(unrelated)
    finally:
        shutil.rmtree(path, ignore_errors=True)
