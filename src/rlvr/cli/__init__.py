"""Command front-ends: `rlvr quickstart | train | sft | eval | verify | report`.

`main` parses the command line and calls one function; `eval`, `sft` and `quickstart` hold their
commands' options and pipelines. `entry` is the console script and `python -m rlvr`: `main` on
the allocator `rlvr.cli.allocator` chooses (it may re-execute the interpreter once first).
"""

import sys

from rlvr.cli.main import main

__all__ = ["entry", "main"]


def entry() -> None:
    from rlvr.cli.allocator import reexec_preloaded

    reexec_preloaded(["-m", "rlvr", *sys.argv[1:]])
    sys.exit(main())
