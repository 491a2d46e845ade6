"""The math verifier, as a sub-package: `verifier` (MathVerifier: the steps and their order),
`extract` and `prose` (where the final answer is), `latex` (low-level LaTeX scanning), `claims` (what
an answer and a reference claim), `forms` (notation normalised before comparison), `fast` (exact
in-process comparison) and `symbolic` (the checks run in killable worker processes)."""

from rlvr.verifiers.math.verifier import MathVerifier

__all__ = ["MathVerifier"]
