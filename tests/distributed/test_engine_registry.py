"""An engine added from outside the package (`rlvr.register_engine`: one module, one table row)
trains under a real 2-rank gloo `torchrun` (`run.data_parallel: ddp`): each rank's engine samples
its share of every step's problems (ranks="shard"), and the run writes its 2 steps' metrics."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

HERE = Path(__file__).parent


def test_a_registered_engine_trains_two_steps_on_two_gloo_ranks(tmp_path):
    from quickrun import run_cli

    run_dir, calls = tmp_path / "run", tmp_path / "calls"
    calls.mkdir()
    cfg, train = tmp_path / "toy.yaml", tmp_path / "train.jsonl"
    train.write_text("".join(json.dumps({"id": f"p{i}", "prompt": f"{i}+{i}=", "solution": str(2 * i)}) + "\n"
                             for i in range(12)))
    cfg.write_text(f"seed: 3\nrun: {{dir: {run_dir}, progress: false, threads: 1, report: false, "
                   "data_parallel: ddp}\nmodel: {path: builtin:tiny-llama}\n"
                   f"data: {{task: '', train_path: {train}, heldout_size: 0, "
                   f"reward_funcs: [{{fn: '{HERE / 'toy_engine.py'}:length_reward'}}]}}\n"
                   "rollout: {engine: toy, max_new_tokens: 6}\n"
                   "grpo: {steps: 2, group_size: 2, prompts_per_step: 4, lr: 1.0e-3}\n")
    src = str(HERE.parent.parent / "src")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo", "TOY_ENGINE_LOG": str(calls),
           "PYTHONPATH": os.pathsep.join([src, str(HERE), os.environ.get("PYTHONPATH", "")])}
    run_cli([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
             str(HERE / "toy_engine_worker.py"), str(cfg)], 600, env)

    steps = [r for r in map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines()) if "loss" in r]
    assert [r["step"] for r in steps] == [0, 1] and all(math.isfinite(r["loss"]) for r in steps)
    by_rank = {r: [json.loads(x) for x in (calls / f"rank{r}.jsonl").read_text().splitlines()] for r in (0, 1)}
    assert [len(v) for v in by_rank.values()] == [2, 2]        # one call per step on each rank
    for step in range(2):
        mine = [set(by_rank[r][step]["problems"]) for r in (0, 1)]
        assert len(mine[0]) == len(mine[1]) == 2 and not mine[0] & mine[1]   # disjoint shares of 4
        assert by_rank[0][step]["seed"] != by_rank[1][step]["seed"]         # each rank its own seed
    assert (run_dir / "final" / "config.json").exists()
