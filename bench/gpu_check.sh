#!/usr/bin/env bash
# The whole GPU check as ONE command on the GPU machine (about 8 minutes on one H200):
#   1. install the wheels packed by bench/gpu_prep.sh (.whl/) into /tmp/site
#   2. bench/gpu.py: TRL GRPOTrainer vs rlvr, Qwen2.5-0.5B shape, 16 x 8 x 256 tokens, bf16
#   3. pytest -m gpu: engine/trainer log-prob parity, learning, exact resume, rlvr sft / eval
#   4. hook for issue 14's torchrun NCCL checks: bench/gpu_dist_check.sh, when it exists
# For the device tool:  carry [".whl"], command "bash bench/gpu_check.sh", timeout_s 560.
# Logs go to $OUT (or runs/gpu_check) so that they come back even when a step times out.
set -uo pipefail
OUT=${OUT:-runs/gpu_check}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=$PWD/src:/tmp/site PATH=/tmp/site/bin:$PATH
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c 'import torch, transformers, trl; print("torch", torch.__version__, "transformers", transformers.__version__, "trl", trl.__version__)'
status=0
timeout 300 python3 bench/gpu.py --steps 5 2>&1 | tee "$OUT/bench.log" || status=1
timeout 200 python3 -m pytest -q -m gpu tests/gpu -p no:cacheprovider 2>&1 | tee "$OUT/pytest.log" || status=1
if [ -x bench/gpu_dist_check.sh ]; then
  timeout 120 bash bench/gpu_dist_check.sh 2>&1 | tee "$OUT/dist.log" || status=1
fi
tail -n 1 "$OUT/bench.log"
exit $status
