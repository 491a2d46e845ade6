"""Per-step seeds: every random draw of a step (problems, sampling, minibatch order) is seeded from
(run seed, step, stream), so a resumed run repeats exactly what an uninterrupted run does."""

from __future__ import annotations

import hashlib


def seed_for(seed: int, step: int, stream: str = "rollout") -> int:
    digest = hashlib.sha256(f"{seed}/{step}/{stream}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1
