#!/usr/bin/env bash
# Three reasoning-gym tasks mixed on the tiny ASCII model (mix f, see README.md): SFT cold start on
# gold answers with every probed checkpoint saved, held-out evaluation of the start, GRPO, held-out
# evaluation again. The README's start was step_400 (probe 15 / 22.5 / 37.5 %): pick START as the
# first checkpoint whose probe line is above ~10 % on every task.
# Run from a scratch directory: bash path/to/run.sh [START]  (writes runs/ and *.txt there)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
start=${1:-runs/sft_f/step_400}
export OMP_NUM_THREADS=1
[ -d "$start" ] || nice -n 10 python "$here/sft_cold.py" "$here/config_f.yaml" runs/sft_f 0.99 450 builtin:tiny-llama-ascii 1
nice -n 10 python "$here/evaluate.py" "$here/config_f.yaml" "$start" 4 | tee before.txt
nice -n 10 python -m rlvr train "$here/config_f.yaml" grpo.steps=150 model.path="$start" run.dir=runs/grpo_f
nice -n 10 python "$here/evaluate.py" "$here/config_f.yaml" runs/grpo_f/final 4 | tee after.txt
