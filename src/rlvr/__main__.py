"""`python -m rlvr` runs the `rlvr` command."""

from rlvr.cli import entry

entry()
