"""The `PRESET key=value` dialect that `rlvr sft` and `rlvr eval` share with `rlvr train`.

A command's words are split into bare words (a YAML preset, or for `rlvr eval` the checkpoint) and
`key=value` overrides; the flags a user gave (registered with no default, so only given ones are
set) become the section's values under the same names. The section itself, its defaults and its
checks live in `rlvr.config.commands`. Guaranteed: a flag and its key set the same field, and
the key given last on the command line (an override after a flag) wins.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any, Sequence

from rlvr.errors import UserError

SUPPRESS = argparse.SUPPRESS   # default of every aliased flag: unset unless the user gave it


def split_words(words: Sequence[str]) -> tuple[list[str], list[str]]:
    """(bare words, `key=value` overrides), each in the order given."""
    bare = [w for w in words if "=" not in w]
    return bare, [w for w in words if "=" in w]


def given_flags(args: argparse.Namespace, cls: type) -> dict[str, Any]:
    """The values of the flags the user gave, keyed by the field of `cls` each one sets."""
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in vars(args).items() if k in names}


def one_at_most(command: str, what: str, words: list[str]) -> str | None:
    if len(words) > 1:
        raise UserError(f"rlvr {command} takes one {what} at most; got {', '.join(words)} "
                        "(every other word must look like key=value)")
    return words[0] if words else None
