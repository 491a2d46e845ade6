"""Pass-rate estimates out of a checkpoint, for a later run's `curriculum.init_path`.

Reads the sampler state a checkpoint saved and writes the tracker's JSONL export. It lives here, not
in `sampling/`, because it reads checkpoints, which the training layer owns; it guarantees the same
rows `PassRateTracker.export` writes for the tracker as saved, and nothing about problems the saved
run never drew.
"""

from __future__ import annotations

from pathlib import Path

from rlvr.sampling.curriculum import PassRateTracker
from rlvr.training.checkpoint import load_state


def export_from_checkpoint(ckpt: str | Path, out: str | Path) -> Path:
    """Write the pass-rate file from a checkpoint's saved sampler state (for `curriculum.init_path`)."""
    tracker = PassRateTracker()
    tracker.load_state_dict(load_state(Path(ckpt)).get("sampler", {}).get("tracker", {}))
    return tracker.export(out)
