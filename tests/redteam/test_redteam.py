"""The red-team suite at every isolation tier this machine offers, as root and as a fresh user.

Each run checks every item (see suite.py): adversarial items score 0, controls score 1, nothing
escapes, nothing is left running, the grader survives, and each item ends within timeout + 1 s.
A tier the machine lacks is skipped with the probe's reason, so CI logs show what was covered.
"""

import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import suite  # noqa: E402
from rlvr.verifiers.sandbox.probe import probe  # noqa: E402

TIERS = ["bwrap", "landlock"]


def require_tier(tier):
    caps = probe(tier)
    if caps.tier != tier:
        pytest.skip(f"tier {tier} unavailable here: {caps.reason}")


def assert_clean(report):
    assert report["adversarial"] >= 40 and report["controls"] >= 5
    assert report["failures"] == [], json.dumps(report["failures"], indent=1)
    assert report["adversarial_ok"] == report["adversarial"]
    assert report["controls_ok"] == report["controls"]


@pytest.mark.parametrize("tier", TIERS)
def test_redteam_as_this_user(tier):
    require_tier(tier)
    assert_clean(suite.run_suite(tier))


@pytest.mark.parametrize("tier", TIERS)
def test_redteam_as_unprivileged_user(tier, sandbox_user, readable_copy):
    require_tier(tier)
    env = {"PATH": "/usr/bin:/bin", "RLVR_BWRAP_SITE": str(readable_copy / "site")}
    suite_py = str(readable_copy / "tests" / "redteam" / "suite.py")
    done = subprocess.run(["/usr/bin/python3", suite_py, "--tier", tier],
                          capture_output=True, text=True, env=env, cwd="/", timeout=170,
                          user=sandbox_user.pw_uid, group=sandbox_user.pw_gid, extra_groups=[])
    assert done.stdout.strip(), done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["uid"] == sandbox_user.pw_uid
    assert_clean(report)


@pytest.mark.parametrize("tier", TIERS)
def test_crowded_uid_keeps_code_rewards(tier, sandbox_user, readable_copy):
    """A non-root grader shares its uid with the trainer and the servers: with 150 threads of that
    uid running, correct programs that fork (stdio and check modes fork per case, a program may
    start threads and a subprocess) still score 1 and a fork bomb still ends (RLIMIT_NPROC counts
    every task of the uid, so a bare limit of 64 turned every reward into a silent crash)."""
    require_tier(tier)
    env = {"PATH": "/usr/bin:/bin", "RLVR_BWRAP_SITE": str(readable_copy / "site")}
    suite_py = str(readable_copy / "tests" / "redteam" / "suite.py")
    done = subprocess.run(["/usr/bin/python3", suite_py, "--tier", tier, "--busy-threads", "150",
                           "--only", "control_stdio", "control_add_check_mode",
                           "control_threads_files_subprocess", "fork_bomb"],
                          capture_output=True, text=True, env=env, cwd="/", timeout=120,
                          user=sandbox_user.pw_uid, group=sandbox_user.pw_gid, extra_groups=[])
    assert done.stdout.strip(), done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["uid"] == sandbox_user.pw_uid
    assert report["failures"] == [], json.dumps(report["failures"], indent=1)
    assert report["adversarial"] == 1 and report["controls"] == 5   # + grader_alive, teardown


def test_harness_reports_escapes_when_isolation_is_missing():
    """The tripwires can fire: with seccomp + rlimits only, host files and the environment leak."""
    if probe("rlimits").tier != "rlimits":
        pytest.skip("no rlimits tier")
    report = suite.run_suite("rlimits", only=suite.HARMLESS)
    failed = {r["name"]: r["problems"] for r in report["failures"]}
    assert set(failed) == {"read_secret_file", "write_outside_workdir"}, failed
    assert failed["read_secret_file"] == ["reward 1.0 (flags [])"]
    assert any(p.startswith("file ") for p in failed["write_outside_workdir"])
    assert report["controls_ok"] == report["controls"] == 3  # control_add, grader_alive, teardown
