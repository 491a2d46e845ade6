"""Problems in: files, saved datasets, hub layouts and hub ids, public formats, mixtures.

`rows` validates one row; `formats` reads public layouts and column maps; `sources` opens a source;
`hub` decides at once whether a hub id can load here; `mixture` reads a config's sources.
"""

from rlvr.data.rows import check_references, row_to_problem
from rlvr.data.mixture import Mixture, eval_problems, train_problems
from rlvr.data.sources import ProblemTable, SourceSpec, load_problems, named_verifiers

__all__ = ["Mixture", "ProblemTable", "SourceSpec", "check_references", "eval_problems", "load_problems",
           "row_to_problem", "named_verifiers", "train_problems"]
