"""Run model-written code in an OS-level sandbox (the design: docs/design/sandbox.md).

Trusted side: `probe` (which isolation tier the machine allows), `pool` (zygote processes and
futures), `cgroup` (per-zygote memory and pids ceilings when root), `spec` (test shapes,
assert-to-case conversion), `compare` (strict comparator) and `grade` (zygote result →
passed/total/flags). Inside the sandbox, stdlib only: `zygote`, `driver`, `wipe` (also used by
the pool), `codec`, `seccomp`, `landlock`. Expected outputs never cross into the sandbox.
"""

from rlvr.verifiers.sandbox.pool import SandboxPool, SandboxUnavailable
from rlvr.verifiers.sandbox.probe import Capabilities, probe

__all__ = ["Capabilities", "SandboxPool", "SandboxUnavailable", "probe"]
