"""`python -m rlvr.cli` runs the `rlvr` command (`entry`: on the allocator `rlvr.cli.allocator` chooses)."""

from rlvr.cli import entry

entry()
