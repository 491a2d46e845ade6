"""FSDP2's sampling copy under a real 2-rank gloo `torchrun`: after an update, every rank's copy
equals the policy (rank 1 too: a full state dict gathered with `cpu_offload` exists on rank 0 only,
so a copy loaded from it leniently kept the initial weights there)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).parent


def test_every_rank_samples_from_the_updated_policy(tmp_path):
    from quickrun import run_cli

    out = tmp_path / "copy"
    run_cli([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
             str(HERE / "copy_worker.py"), str(out)], timeout=600)
    for rank in (0, 1):
        got = json.loads(Path(f"{out}.rank{rank}").read_text())
        assert got["step"] > 1e-3, got          # the update moved the weights
        assert got["diff"] == 0.0, (rank, got)  # and the copy holds exactly the moved weights
        assert got["same_module"], got
