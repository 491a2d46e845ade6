"""Held-out reward per task of a checkpoint on config.yaml's held-out split (the same split and
scorers `rlvr train` evaluates with): python evaluate.py config.yaml MODEL_DIR [K].

Prints one JSON line: greedy reward per task, sampled reward per task (K samples per question at
the config's temperature, fixed seed; default K=8), and how many distinct greedy answers each task
got (1 means a constant answer); then three greedy answers per task next to the gold answer."""
import json
import sys
from collections import defaultdict

from rlvr import config as config_mod
from rlvr.evaluation.metrics import score_groups
from rlvr.models.policy import load_policy
from rlvr.rollout.base import SamplingParams
from rlvr.rollout.hf import HFEngine
from rlvr.training.setup import build_problems, set_threads

cfg = config_mod.load(sys.argv[1], [f"model.path={sys.argv[2]}"])
k = int(sys.argv[3]) if len(sys.argv) > 3 else 8
set_threads(1)
verifiers, _, heldout, _ = build_problems(cfg)
model, tokenizer = load_policy(cfg.model.path)
engine = HFEngine(model, tokenizer)
out: dict = {"model": sys.argv[2], "heldout_per_task": {}, "greedy": {}, "sampled": {}, "distinct_greedy": {}}
examples = defaultdict(list)
for mode, params, n in (("greedy", SamplingParams(max_new_tokens=cfg.rollout.max_new_tokens, greedy=True), 1),
                        ("sampled", SamplingParams(temperature=cfg.rollout.temperature,
                                                   max_new_tokens=cfg.rollout.max_new_tokens), k)):
    per, answers = defaultdict(list), defaultdict(set)
    for start in range(0, len(heldout), 64):
        groups = engine.generate(heldout[start:start + 64], n, params, seed=1234)
        score_groups(groups, verifiers)
        for g in groups:
            task = g.problem.verifier
            per[task] += [c.score.reward for c in g.completions]
            if mode == "greedy":
                answers[task].add(g.completions[0].text.strip())
                if len(examples[task]) < 3:
                    examples[task].append((g.problem.reference, g.completions[0].text.strip()))
    for task, rewards in sorted(per.items()):
        out[mode][task] = round(sum(rewards) / len(rewards), 4)
        if mode == "greedy":
            out["heldout_per_task"][task] = len(rewards)
            out["distinct_greedy"][task] = len(answers[task])
print(json.dumps(out))
for task, rows in sorted(examples.items()):
    print(task, " | ".join(f"gold {g!r} got {a!r}" for g, a in rows))
for v in verifiers.values():
    v.close()
