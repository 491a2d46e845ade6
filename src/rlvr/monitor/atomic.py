"""Files a resume reads, written so that a crash or a full disk leaves the old file or the new one,
never half of one: a temporary sibling, fsynced, renamed over the target, the directory fsynced."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Callable


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_text_atomic(path: Path, text: str) -> None:
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with tmp.open("w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(path.parent)


def write_dir_atomic(path: Path, fill: Callable[[Path], None]) -> None:
    """`fill(tmp)` writes a directory's files into a temporary sibling, which then takes `path`'s
    place; on any failure the temporary directory goes and `path` stays as it was."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    old = path.with_name(f".{path.name}.old-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir(parents=True)
        fill(tmp)
        for p in sorted(tmp.rglob("*")):
            if p.is_file():
                with p.open("rb") as f:
                    os.fsync(f.fileno())
        if path.exists():
            os.replace(path, old)
        os.replace(tmp, path)
        fsync_dir(path.parent)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)
