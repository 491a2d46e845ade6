#!/usr/bin/env bash
# Three reasoning-gym tasks mixed on the tiny ASCII model: SFT cold start on gold answers, then GRPO.
# Run from a scratch directory: bash path/to/run.sh  (writes sft.jsonl and runs/ there)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export OMP_NUM_THREADS=1
nice -n 10 python "$here/prepare.py" "$here/config.yaml" sft.jsonl 3000
nice -n 10 python -m rlvr sft --model builtin:tiny-llama-ascii --data sft.jsonl --out runs/rg_mix_sft \
  --steps 300 --threads 1
nice -n 10 python -m rlvr train "$here/config.yaml" "$@"
