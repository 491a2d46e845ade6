"""The `rlvr` command runs on mimalloc where its wheel is installed (`rlvr.cli.allocator`): the
console script re-executes itself once with libmimalloc preloaded, and the preload stays out of
the environment its subprocesses inherit. Real processes, real loader: nothing is faked."""

import json
import os
import subprocess
import sys

import pytest

from rlvr.cli import allocator

pytestmark = pytest.mark.skipif(allocator.preload_reason() is not None,
                                reason=f"no preload here: {allocator.preload_reason()}")

# what the re-executed process sees of itself and of a child it starts
_PROBE = r"""
import json, os, subprocess, sys
from rlvr.cli.allocator import reexec_preloaded
from rlvr.models.device import host_allocator
reexec_preloaded(["-c", sys.argv[1] if len(sys.argv) > 1 else PROBE])
child = subprocess.run([sys.executable, "-c",
                        "from rlvr.models.device import host_allocator; print(host_allocator())"],
                       capture_output=True, text=True, check=True).stdout.strip()
print(json.dumps({"pid": os.getpid(), "self": host_allocator(), "child": child,
                  "ld_preload": os.environ.get("LD_PRELOAD"),
                  "purge": os.environ.get("MIMALLOC_PURGE_DELAY"),
                  "marker": "RLVR_ALLOCATOR_LD_PRELOAD_WAS" in os.environ}))
"""


def _probe(env_extra: dict) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("LD_PRELOAD", "RLVR_ALLOCATOR", "MIMALLOC_PURGE_DELAY")} | env_extra
    code = _PROBE.replace("PROBE", repr(_PROBE))
    out = subprocess.run([sys.executable, "-c", code, code], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_command_reexecutes_on_mimalloc_and_its_children_start_without_it():
    seen = _probe({})
    assert seen["self"] == "mimalloc"
    assert seen["child"] == "glibc", "LD_PRELOAD leaked into a subprocess's environment"
    assert seen["ld_preload"] is None and not seen["marker"]
    assert seen["purge"] == "-1", "mimalloc keeps what it frees (its default purge refaults every update)"


def test_a_callers_own_mimalloc_option_wins():
    assert _probe({"MIMALLOC_PURGE_DELAY": "100"})["purge"] == "100"


def test_a_callers_own_ld_preload_is_kept_for_the_children():
    lib = allocator.mimalloc_library()
    seen = _probe({"LD_PRELOAD": lib})   # any library the caller preloads comes back for the children
    assert seen["self"] == "mimalloc" and seen["ld_preload"] == lib and seen["child"] == "mimalloc"


def test_rlvr_allocator_system_keeps_glibc():
    seen = _probe({"RLVR_ALLOCATOR": "system"})
    assert seen["self"] == "glibc" and seen["child"] == "glibc"


def test_interpreter_options_survive_the_reexec():
    """torchrun starts its ranks with `python -u`: the re-executed process keeps that option."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("LD_PRELOAD", "RLVR_ALLOCATOR", "PYTHONUNBUFFERED")}
    code = ("import sys; from rlvr.cli.allocator import reexec_preloaded; "
            "reexec_preloaded(['-c', sys.argv[1]]) if len(sys.argv) > 1 else None; "
            "from rlvr.models.device import host_allocator; "
            "print(host_allocator(), sys.orig_argv[1], sys.flags.optimize)")
    out = subprocess.run([sys.executable, "-u", "-O", "-c", code, code], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.stdout.split() == ["mimalloc", "-u", "1"], out.stdout + out.stderr[-2000:]
