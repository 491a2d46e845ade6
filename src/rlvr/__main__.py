"""`python -m rlvr` runs the `rlvr` command."""

import sys

from rlvr.cli.main import main

sys.exit(main())
