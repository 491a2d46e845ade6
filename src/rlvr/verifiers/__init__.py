"""Verifiers: programs that score completions. See `base.py` for the protocol and registry."""

from rlvr.verifiers.base import Verifier, get_verifier, register_verifier, verifier_names

__all__ = ["Verifier", "get_verifier", "register_verifier", "verifier_names"]
