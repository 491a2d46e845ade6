"""Greedy held-out reward per task of a checkpoint on config.yaml's held-out split:
python evaluate.py config.yaml MODEL_DIR (the same split and scorers `rlvr train` evaluates with)."""
import json
import sys

from rlvr import config as config_mod
from rlvr.evaluation.metrics import greedy_accuracy
from rlvr.models.policy import load_policy
from rlvr.rollout.hf import HFEngine
from rlvr.training.setup import build_problems, set_threads

cfg = config_mod.load(sys.argv[1], [f"model.path={sys.argv[2]}"])
set_threads(1)
verifiers, _, heldout, _ = build_problems(cfg)
model, tokenizer = load_policy(cfg.model.path)
result = greedy_accuracy(HFEngine(model, tokenizer), heldout, verifiers, cfg.rollout.max_new_tokens)
print(json.dumps({k: round(v, 4) for k, v in result.items()}))
for v in verifiers.values():
    v.close()
