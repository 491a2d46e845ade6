"""`python -m rlvr.cli` runs the `rlvr` command."""

import sys

from rlvr.cli.main import main

sys.exit(main())
