"""The agent red team's second corpus (agent_suite.py) at every tier this machine offers, as this
user and as a fresh unprivileged user: the task's files that a check reads, stdlib imports a check
makes, the python tool's monitor, and the sandbox's cleanup between jobs."""

import json
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import agent_suite  # noqa: E402
from rlvr.verifiers.sandbox.probe import probe  # noqa: E402

TIERS = ["bwrap", "landlock"]


def _require(tier):
    caps = probe(tier)
    if caps.tier != tier:
        pytest.skip(f"tier {tier} unavailable here: {caps.reason}")


def _assert_clean(report):
    assert report["items"] == len(agent_suite.ITEMS) >= 25
    assert report["failures"] == [], json.dumps(report["failures"], indent=1)


@pytest.mark.parametrize("tier", TIERS)
def test_agent_suite_as_this_user(tier):
    _require(tier)
    _assert_clean(agent_suite.run_suite(tier))


@pytest.mark.parametrize("tier", TIERS)
def test_agent_suite_as_unprivileged_user(tier, sandbox_user, readable_copy):
    _require(tier)
    env = {"PATH": "/usr/bin:/bin", "RLVR_BWRAP_SITE": str(readable_copy / "site")}
    script = str(readable_copy / "tests" / "redteam" / "agent_suite.py")
    done = subprocess.run(["/usr/bin/python3", script, "--tier", tier], capture_output=True,
                          text=True, env=env, cwd="/", timeout=170, user=sandbox_user.pw_uid,
                          group=sandbox_user.pw_gid, extra_groups=[])
    assert done.stdout.strip(), done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["uid"] == sandbox_user.pw_uid
    _assert_clean(report)
