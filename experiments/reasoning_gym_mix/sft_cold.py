"""SFT cold start for config.yaml's reasoning-gym mix, stopped on an accuracy threshold:
python sft_cold.py config.yaml OUT_DIR [STOP_ACC] [MAX_STEPS] [INIT_MODEL] [SAVE_EACH].

Fresh training-split draws every step (ReasoningGymTask never draws a held-out question); every 50
steps the greedy accuracy on a fixed probe of 40 training-split items per task is
measured, and training stops once the LOWEST task accuracy reaches STOP_ACC (default 0.2): a partial
cold start on every task, so that GRPO has something to raise on each (a stop on the mean once
stopped with one task at 0 %). INIT_MODEL (default builtin:tiny-llama-ascii) continues from a
checkpoint. SAVE_EACH=1 also saves OUT_DIR/step_N at every probe (to pick a partial checkpoint
afterwards). The probe is not the held-out split."""
import json
import random
import sys
from pathlib import Path

from rlvr import config as config_mod
from rlvr.evaluation.metrics import greedy_accuracy
from rlvr.models.policy import load_policy
from rlvr.rollout.hf import HFEngine
from rlvr.training.setup import build_task, set_threads
from rlvr.training.sft import SFTConfig, encode_pair, sft

cfg = config_mod.load(sys.argv[1])
out, stop = Path(sys.argv[2]), float(sys.argv[3]) if len(sys.argv) > 3 else 0.2
max_steps = int(sys.argv[4]) if len(sys.argv) > 4 else 1500
init = sys.argv[5] if len(sys.argv) > 5 else "builtin:tiny-llama-ascii"
save_each = len(sys.argv) > 6 and sys.argv[6] == "1"
set_threads(1)
task = build_task(cfg)
verifiers = task.verifiers()
model, tokenizer = load_policy(init, seed=cfg.seed)
probe_rng = random.Random(f"{cfg.seed}/probe")
probe = []
for name, _ in task.tasks:  # 40 training-split items per task
    pool = [p for p in task.sample(probe_rng, 400) if p.verifier == f"rg.{name}"]
    probe += pool[:40]
engine = HFEngine(model, tokenizer)


def batches():
    rng = random.Random(f"{cfg.seed}/sft")
    while True:
        yield [encode_pair(tokenizer, p, task.trace(p)) for p in task.sample(rng, 64)]


def evaluate(step):
    r = greedy_accuracy(engine, probe, verifiers, cfg.rollout.max_new_tokens)
    per = {k.split("/")[1]: round(v, 3) for k, v in r.items() if k.endswith("/accuracy") and k.count("/") == 2}
    print(f"sft step {step}: probe greedy accuracy {per} min {min(per.values()):.3f}", flush=True)
    if save_each:  # every probed checkpoint, so a partial one can be picked afterwards
        model.save_pretrained(out / f"step_{step}")
        tokenizer.save_pretrained(out / f"step_{step}")
    model.train()
    return min(per.values())


result = sft(model, tokenizer, batches(), SFTConfig(steps=max_steps, eval_every=50, min_steps=min(50, max_steps),
                                                    stop_accuracy=stop, seed=cfg.seed), evaluate=evaluate)
model.save_pretrained(out)
tokenizer.save_pretrained(out)
(out / "sft_summary.json").write_text(json.dumps(result, indent=2))
print(f"saved {out} after {result['steps']} steps (loss {result['loss']:.4f})")
for v in verifiers.values():
    v.close()
