#!/usr/bin/env bash
# Issue 44: the trainer, 2 vLLM servers and code rewards (stdio tests, the tiny model's raw answers),
# 20 steps, run by a non-root grader (a user made here; run as root). Prints the crash and no_code
# flag rates per step, the grader uid's peak task count, and the completions that compile against
# those flagged `crash` (a compiling answer exits 0: a crash there is the sandbox failing the job).
# usage: [TIER=bwrap|landlock] bash experiments/nonroot_code_rewards.sh REPO [SRC] [WORKDIR]
#   REPO: a checkout with .venv-vllm built (make venv-vllm); SRC: the code to run (default REPO/src).
# The venv's interpreter may live under a 0700 /root (pyenv): /root is made 0711 for the run only.
set -euo pipefail
REPO=$(cd "$1" && pwd); SRC=${2:-$REPO/src}; U=rlvrgrader; W=${3:-/tmp/r44}
id -u $U >/dev/null 2>&1 || useradd -m -s /bin/bash $U
rm -rf $W && mkdir -p $W && chown $U $W
python3 - "$W" "${TIER:-bwrap}" <<'PY'
import json, sys
w, tier = sys.argv[1], sys.argv[2]
rows = []
for a in range(1, 9):
    for b in range(1, 5):
        rows.append({"id": f"c{a}-{b}", "prompt": f"{a}+{b}=", "verifier": "code",
                     "tests": {"stdio": [{"input": "", "output": str(a + b)}]}})
open(f"{w}/code.jsonl", "w").write("".join(json.dumps(r) + "\n" for r in rows))
open(f"{w}/cfg.yaml", "w").write(
    f"seed: 0\n"
    f"run: {{dir: {w}/run, eval_every: 0, save_every: 0, progress: false, threads: 1, report: false,"
    " log_completions: 1}\n"
    "model: {path: 'builtin:tiny-llama'}\n"
    f"data: {{task: '', train_path: {w}/code.jsonl, eval_path: {w}/code.jsonl,"
    f" verifier_options: {{code: {{extract: raw, tier: {tier}}}}}}}\n"
    "rollout: {engine: vllm_server, vllm_servers: 2, max_new_tokens: 12,"
    " vllm_options: {kv_cache_memory_bytes: 268435456}}\n"
    "grpo: {steps: 20, group_size: 4, prompts_per_step: 4, lr: 5.0e-5}\n")
PY
chown -R $U $W
( while sleep 5; do echo "$(date +%T) uid_tasks=$(ps -L -u $U --no-headers | wc -l)"; done ) > $W/tasks.log 2>&1 &
MON=$!
set +e
ROOT_MODE=$(stat -c %a /root); chmod o+x /root; trap "chmod $ROOT_MODE /root" EXIT
runuser -u $U -- env HOME="$(getent passwd "$U" | cut -d: -f6)" OMP_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false \
  PYTHONPATH=$SRC $REPO/.venv-vllm/bin/python -m rlvr.cli train $W/cfg.yaml > $W/train.log 2>&1
RC=$?
kill $MON
echo "rc=$RC"; grep -m3 -i "sandbox" $W/train.log || true
python3 - "$W" "${TIER:-bwrap}" <<'PY'
import json, sys
w = sys.argv[1]
rows = [json.loads(l) for l in open(f"{w}/run/metrics.jsonl") if '"step"' in l]
rows = [r for r in rows if "reward/mean" in r]
keys = sorted({k for r in rows for k in r if "crash" in k or k.startswith("sandbox/") or k.startswith("flags/")})
print("steps", len(rows))
for k in keys:
    print(k, [r.get(k) for r in rows])
PY
sort -t= -k2 -n $W/tasks.log | tail -1
$REPO/.venv-vllm/bin/python "$(dirname "$0")/nonroot_code_rewards_count.py" "$W"
