"""The zygote pool: respawn after death or a hang, recycling, futures, tier reporting."""

import importlib
import os
import signal
import time

import pytest

from rlvr.verifiers.sandbox import SandboxPool, SandboxUnavailable, probe

JOB = {"code": "def f(x):\n    return x + 1\n", "entry": "f", "args": [[41]]}


@pytest.fixture(scope="module")
def tier():
    caps = probe()
    if caps.tier not in ("bwrap", "landlock"):
        pytest.skip(f"no isolation tier here: {caps.reason}")
    return caps.tier


def tree(pid):
    """pid and all its descendants (bwrap starts the zygote in a new session, under its init)."""
    found = [pid]
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/children") as f:
            for child in f.read().split():
                found += tree(int(child))
    return found


def answer(reply):
    return reply["out"].splitlines()[0]


def test_futures_and_results(tier):
    with SandboxPool(2, timeout_s=1.0) as pool:
        futures = [pool.submit("call", JOB) for _ in range(6)]
        assert [answer(f.result()) for f in futures] == ['["case",0,["ok",42]]'] * 6
        assert pool.tier == tier


def test_dead_zygote_is_replaced(tier):
    with SandboxPool(1, timeout_s=1.0) as pool:
        pool.start()
        zygote = pool._idle.queue[0]
        os.killpg(zygote.proc.pid, signal.SIGKILL)
        zygote.proc.wait()
        assert answer(pool.run("call", JOB)) == '["case",0,["ok",42]]'


def test_hung_zygote_is_killed_after_the_grace_period(tier):
    with SandboxPool(1, timeout_s=0.3) as pool:
        pool.start()
        zygote = pool._idle.queue[0]
        for pid in tree(zygote.proc.pid):
            os.kill(pid, signal.SIGSTOP)
        start = time.monotonic()
        assert pool.run("call", JOB)["status"] == "zygote_lost"
        assert time.monotonic() - start < 0.3 + 3.0 + 1.0
        assert answer(pool.run("call", JOB)) == '["case",0,["ok",42]]'


def test_zygote_is_recycled_after_n_jobs(tier):
    with SandboxPool(1, timeout_s=1.0, recycle_after=2) as pool:
        pids = []
        for _ in range(5):
            pool.run("call", JOB)
            pids.append(pool._idle.queue[0].proc.pid)
        assert pids[0] == pids[1] and pids[1] != pids[2] and pids[2] == pids[3] != pids[4]


def test_root_confines_each_zygote_tree_in_a_memory_cgroup(tier):
    if os.geteuid() != 0:
        pytest.skip("cgroups are only used when the grader is root")
    # rlimits allow 8 x 100 MB (each under the 128 MB address-space cap); the cgroup allows 512 MB.
    # The job waits until every child has its 100 MB or is gone (each writes a byte and closes its
    # end; a child the cgroup kills closes it by dying): a fixed sleep let a loaded machine end the
    # job before enough children had allocated (failcnt 0 in a CI run under load).
    hog = ("import os, time\nr, w = os.pipe()\nfor _ in range(8):\n    if os.fork() == 0:\n"
           "        os.close(r)\n        x = bytearray(100 << 20)\n        os.write(w, b'x')\n"
           "        os.close(w)\n        time.sleep(10)\n        os._exit(0)\n"
           "os.close(w)\nwhile os.read(r, 8):\n    pass\ndef f():\n    return 1\n")
    with SandboxPool(1, timeout_s=6.0, mem_mb=128) as pool:
        pool.start()
        dirs = pool._idle.queue[0].cgroups
        if not dirs:
            pytest.skip("no writable memory+pids cgroup here")
        pool.run("call", {"code": hog, "entry": "f", "args": [[]]})
        mem = dirs[0]
        if (mem / "memory.failcnt").exists():
            assert int((mem / "memory.failcnt").read_text()) > 0
            assert int((mem / "memory.max_usage_in_bytes").read_text()) <= (2 * 128 + 256) << 20
        else:
            assert "oom_kill 0" not in (mem / "memory.events").read_text()
        assert answer(pool.run("call", JOB)) == '["case",0,["ok",42]]'
    assert not any(d.exists() for d in dirs)


def test_probe_falls_back_to_landlock_when_namespaces_are_refused(monkeypatch, tier):
    probe_mod = importlib.import_module("rlvr.verifiers.sandbox.probe")
    monkeypatch.setattr(probe_mod, "find_bwrap", lambda: "/bin/false")
    caps = probe_mod._probe(None)
    if probe_mod.landlock_abi() < 1:
        assert caps.tier == "rlimits"
    else:
        assert caps.tier == "landlock" and caps.reason.startswith("bwrap: ")
    monkeypatch.setattr(probe_mod, "landlock_abi", lambda: 0)
    assert probe_mod._probe(None).tier == "rlimits"
    monkeypatch.setattr(probe_mod, "_CACHE", {})
    with pytest.raises(SandboxUnavailable, match="no isolation"):
        SandboxPool(1, tier=None)


@pytest.mark.parametrize("pool_tier", ["bwrap", "landlock"])
def test_other_processes_of_the_sandbox_uid_do_not_use_up_a_jobs_processes(pool_tier):
    """RLIMIT_NPROC counts every process of a uid: with a pids cgroup bounding the zygote tree,
    processes of the sandbox uid elsewhere on the machine (here 40, the job may fork 2 with a
    limit of 32) leave the job its own budget."""
    import subprocess
    if os.geteuid() != 0:
        pytest.skip("cgroups are only used when the grader is root")
    if probe(pool_tier).tier != pool_tier:
        pytest.skip(f"tier {pool_tier} unavailable here")
    forker = ("import os\ndef f():\n    pids = [os.fork() for _ in range(2)]\n"
              "    if 0 in pids:\n        os._exit(0)\n    for p in pids:\n        os.waitpid(p, 0)\n"
              "    return 1\n")
    with SandboxPool(1, tier=pool_tier, timeout_s=2.0, nproc=32) as pool:
        pool.start()
        if not pool._idle.queue[0].cgroups or pool.caps.run_uid is None:
            pytest.skip("no pids cgroup or no dedicated sandbox uid here")
        uid = pool.caps.run_uid
        others = [subprocess.Popen(["sleep", "30"], user=uid, group=uid, extra_groups=[])
                  for _ in range(40)]
        try:
            reply = pool.run("call", {"code": forker, "entry": "f", "args": [[]]})
        finally:
            for proc in others:
                proc.kill()
                proc.wait()
    assert answer(reply) == '["case",0,["ok",1]]', reply


@pytest.mark.parametrize("pool_tier", ["bwrap", "landlock"])
def test_job_directory_size_is_bounded(pool_tier):
    """Files each under RLIMIT_FSIZE add up: the bwrap tier's tmpfs stops them at its size; in the
    landlock tier the job directory is on the host disk, so the zygote measures it and ends a job
    past the same bound (a job wrote 96 MiB there where bwrap caps 64)."""
    if probe(pool_tier).tier != pool_tier:
        pytest.skip(f"tier {pool_tier} unavailable here")
    filler = ("def f():\n    total = 0\n    for i in range(12):\n        try:\n"
              "            with open(f'part{i}', 'wb') as out:\n"
              "                for _ in range(8):\n                    out.write(b'x' * (1 << 20))\n"
              "                    total += 1 << 20\n        except OSError:\n            break\n"
              "    return total\n")
    with SandboxPool(1, tier=pool_tier, timeout_s=5.0, tmpfs_mb=16) as pool:
        reply = pool.run("call", {"code": filler, "entry": "f", "args": [[]]})
        written = (int(answer(reply).split(",")[-1].rstrip("]]")) if reply["status"] == "exit"
                   else None)
        assert reply["status"] == "output_limit" or written <= 16 << 20, reply
        if reply["status"] == "output_limit":
            assert reply["wall"] < 2.0, reply
        assert pool.workdirs() == [] or not os.listdir(os.path.join(pool.workdirs()[0], "job"))
