#!/usr/bin/env bash
# Three reasoning-gym tasks mixed on the tiny ASCII model: SFT cold start on gold answers (stopped on
# a probe accuracy threshold), held-out evaluation, GRPO, held-out evaluation again.
# Run from a scratch directory: bash path/to/run.sh  (writes runs/ and *.json there)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export OMP_NUM_THREADS=1
nice -n 10 python "$here/sft_cold.py" "$here/config.yaml" runs/rg_mix_sft 0.35 1500
nice -n 10 python "$here/evaluate.py" "$here/config.yaml" runs/rg_mix_sft | tee before.txt
nice -n 10 python -m rlvr train "$here/config.yaml" "$@"
nice -n 10 python "$here/evaluate.py" "$here/config.yaml" runs/rg_mix/final | tee after.txt
