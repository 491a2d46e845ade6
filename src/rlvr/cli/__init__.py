"""Command front-ends: `rlvr quickstart | train | sft | eval | verify | report`.

`main` parses the command line and calls one function; `eval`, `sft` and `quickstart` hold their
commands' options and pipelines.
"""

from rlvr.cli.main import main

__all__ = ["main"]
