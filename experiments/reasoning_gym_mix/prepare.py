"""Write the SFT cold-start rows {prompt, completion} for config.yaml's tasks (train split only:
ReasoningGymTask never draws a held-out question for training)."""
import json
import random
import sys

from rlvr import config as config_mod
from rlvr.training.setup import build_task

cfg = config_mod.load(sys.argv[1])
task = build_task(cfg)
n = int(sys.argv[3])
with open(sys.argv[2], "w") as f:
    for p in task.sample(random.Random(f"{cfg.seed}/sft"), n):
        f.write(json.dumps({"prompt": p.prompt, "completion": task.trace(p)}) + "\n")
lens = [len(p.prompt) for p in task.heldout(cfg.data.heldout_size)]
print(f"wrote {n} rows; held-out prompt chars max {max(lens)}")
