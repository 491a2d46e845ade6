"""Whether a hub id can be loaded here, decided at once: a cached copy, or a reachable hub.

Both `data.train_path=org/name` and `model.path=org/name` go through `check_hub_id` before any
library call that would retry for a minute: with `HF_HUB_OFFLINE=1`, or when the hub's host does
not accept a TCP connection within a few seconds, an id with no cached copy is a `UserError`
naming the id, the local paths tried and how to work offline. Not guaranteed: that a reachable
hub holds the id (the library that loads it says so), or that a cached copy is complete.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from urllib.parse import urlparse

from rlvr.errors import UserError

_CONNECT_S = 3.0


def looks_like_hub_id(path: str) -> bool:
    """`org/name`, and not a mistyped local path: no leading `.`/`/`/`~`, one slash, and `org` is not
    a directory here (`models/mine` with a `models/` directory is a local path that is missing)."""
    if path.count("/") != 1 or path.startswith((".", "/", "~")) or path.endswith("/"):
        return False
    return not Path(path.split("/", 1)[0]).is_dir()


def offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


def cached(repo_id: str, kind: str) -> bool:
    """A copy of `repo_id` (kind: "model" | "dataset") in the hub cache (or datasets' cache)."""
    from huggingface_hub import constants

    folder = f"{kind}s--{repo_id.replace('/', '--')}"
    if (Path(constants.HF_HUB_CACHE) / folder).is_dir():
        return True
    if kind == "dataset":
        base = os.environ.get("HF_DATASETS_CACHE") or str(Path(constants.HF_HOME) / "datasets")
        return (Path(base) / repo_id.replace("/", "___")).is_dir()
    return False


def hub_reachable(timeout: float = _CONNECT_S) -> bool:
    """The hub endpoint accepts a TCP connection within `timeout` seconds."""
    from huggingface_hub import constants

    url = urlparse(constants.ENDPOINT)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname or "huggingface.co", port), timeout=timeout):
            return True
    except OSError:
        return False


def check_hub_id(key: str, repo_id: str, kind: str) -> None:
    """Raise `UserError` at once when `repo_id` can be neither read from a cache nor fetched."""
    if cached(repo_id, kind):
        return
    why = "HF_HUB_OFFLINE is set" if offline() else None
    if why is None and not hub_reachable():
        why = "the hub is not reachable from here"
    if why is None:
        return
    local = Path(repo_id).expanduser().absolute()
    raise UserError(f"{key}: {repo_id!r} is not a local path ({local} does not exist) and looks like "
                    f"a hub {kind} id, but {why} and no cached copy exists. Work offline: download "
                    f"it where there is a network (it is then cached; run with HF_HUB_OFFLINE=1), or "
                    f"pass a local folder (a {kind} saved in the hub's layout)")
