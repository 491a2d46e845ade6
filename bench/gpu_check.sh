#!/usr/bin/env bash
# The one-shot GPU check, as phases ordered by what they decide (a later phase is worth running
# only if the earlier ones pass): each has its own time box and its own file $OUT/<phase>.log,
# written as it goes, useful alone (a phase that fails or runs out of time leaves the others'
# numbers), and ends with a status line {"phase": ..., "rc": ..., "s": ..., "box_s": ..., "timed_out": ...}.
#   env     GPU, clocks, driver, library versions; installs the wheels of bench/gpu_prep.sh    30 s
#   micro   bench/gpu_micro.py: rlvr's own GPU paths, no TRL (graph decode = eager after
#           poisoned frees, decode tok/s first call vs replay, engine vs trainer log-probs,
#           update tok/s + peak memory, capture in a thread)                                  100 s
#   memory  bench/gpu_memory.py: one update at the default micro-batch budget on the
#           Qwen2.5-1.5B shape, predicted vs peak memory, one process then DDP under torchrun
#           (world size 1, NCCL); bench/gpu_dist.py fsdp2: FSDP2 equals the plain update      80 s
#   pytest  pytest -m gpu, tests/gpu/test_gpu_paths.py first (-v: a timed-out run still shows
#           which tests passed)                                                               90 s
#   trl     bench/gpu.py: one TRL step and one rlvr step on the Qwen2.5-0.5B shape            60 s
# 360 s of boxes in all (+ a few seconds between); 6 result files (5 logs, summary.json).
# Unverified: this script has not run on a GPU yet, so the boxes are estimates.
# $OUT/summary.json gathers every phase's status line and headline numbers.
#
# On the GPU machine (device tool): carry [".whl"], command "bash bench/gpu_check.sh", timeout_s 420.
# DRY=1: every phase on the CPU (CUDA hidden, tiny shapes, a few steps), to prove the script here;
#   tests/unit/test_gpu_check_dry.py runs it and checks each phase's file. PHASES="micro memory" runs
#   only those; BOX_micro=60 changes a box. PY: the Python to use (default python3).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
OUT=${OUT:-$ROOT/runs/gpu_check}
DRY=${DRY:-0}
PY=${PY:-python3}
PHASES=${PHASES:-env micro memory pytest trl}
WHEEL_LIMIT_BYTES=$((10 * 1024 * 1024))
mkdir -p "$OUT"
cd "$ROOT" || exit 3
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false OUT DRY PY
if [ "$DRY" = 1 ]; then
  export CUDA_VISIBLE_DEVICES="" GLOO_SOCKET_IFNAME=lo OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
  TINY=(--tiny)
else
  TINY=()
fi
export PYTHONPATH=$ROOT/src:/tmp/site${PYTHONPATH:+:$PYTHONPATH} PATH=/tmp/site/bin:$PATH

install_wheels() {
  if [ "$DRY" = 1 ]; then echo "DRY=1: no wheels installed (this environment's packages)"; return 0; fi
  [ -d .whl ] || { echo "no .whl/ (run bash bench/gpu_prep.sh here first): TRL and rlvr's extras missing"; return 1; }
  local bytes
  bytes=$(du -sb .whl | cut -f1)
  echo "wheels: $(ls .whl | wc -l) files, $bytes bytes (limit $WHEEL_LIMIT_BYTES)"
  [ "$bytes" -le "$WHEEL_LIMIT_BYTES" ] || { echo "wheels over the limit"; return 1; }
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
}

run_env() {
  local rc=0
  install_wheels || rc=1
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu \
      --format=csv || rc=1
  else
    echo "nvidia-smi: not found"
  fi
  "$PY" - <<'EOF' || rc=1
import importlib, json, platform
out = {"python": platform.python_version()}
for name in ("torch", "transformers", "accelerate", "peft", "trl", "datasets", "tokenizers", "rlvr"):
    try:
        out[name] = getattr(importlib.import_module(name), "__version__", "?")
    except Exception as exc:
        out[name] = f"missing ({type(exc).__name__})"
import torch
out["cuda"] = torch.version.cuda
out["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
if out["gpus"]:
    free, total = torch.cuda.mem_get_info(0)
    out["free_gib"], out["total_gib"] = round(free / 2**30, 1), round(total / 2**30, 1)
print(json.dumps(out))
EOF
  return $rc
}

run_micro() { "$PY" bench/gpu_micro.py "${TINY[@]}"; }
run_memory() {
  local rc=0
  "$PY" bench/gpu_memory.py "${TINY[@]}" || rc=1
  "$PY" -m torch.distributed.run --standalone --nproc_per_node=1 bench/gpu_memory.py --ddp "${TINY[@]}" || rc=1
  "$PY" -m torch.distributed.run --standalone --nproc_per_node=1 bench/gpu_dist.py fsdp2 || rc=1
  return $rc
}
run_pytest() {
  "$PY" -m pytest -v -m gpu tests/gpu/test_gpu_paths.py tests/gpu/test_gpu.py -p no:cacheprovider -rs
}
run_trl() { "$PY" bench/gpu.py "${TINY[@]}" --steps 1 --warmup 0; }

if [ "${1:-}" = --phase ]; then "run_$2"; exit $?; fi     # one phase, inside its time box

box_of() {   # BOX_<phase>=S overrides a box
  local over="BOX_$1"
  [ -n "${!over:-}" ] && { echo "${!over}"; return; }
  case $1 in env) echo 30;; micro) echo 100;; memory) echo 80;; pytest) echo 90;; trl) echo 60;; esac
}

status=0
for name in $PHASES; do
  box=$(box_of "$name")
  log="$OUT/$name.log"
  echo "== $name (box ${box} s) -> $log"
  t0=$(date +%s%N)
  timeout --kill-after=5 "$box" bash "$HERE/gpu_check.sh" --phase "$name" >"$log" 2>&1
  rc=$?
  s=$(( ($(date +%s%N) - t0) / 1000000 ))
  timed_out=false; { [ $rc -eq 124 ] || [ $rc -eq 137 ]; } && timed_out=true
  printf '{"phase": "%s", "rc": %d, "s": %d.%03d, "box_s": %d, "timed_out": %s, "dry": %s}\n' \
    "$name" "$rc" $((s / 1000)) $((s % 1000)) "$box" "$timed_out" "$([ "$DRY" = 1 ] && echo true || echo false)" >>"$log"
  tail -n 4 "$log"
  [ $rc -eq 0 ] || status=1
done

"$PY" - "$OUT" $PHASES <<'EOF'
import json, sys
from pathlib import Path
out, phases = Path(sys.argv[1]), sys.argv[2:]
summary = {}
for name in phases:
    lines = []
    for line in (out / f"{name}.log").read_text(errors="replace").splitlines():
        try:
            lines.append(json.loads(line))
        except ValueError:
            continue
    lines = [x for x in lines if isinstance(x, dict)]
    status = lines[-1] if lines and lines[-1].get("phase") == name and "rc" in lines[-1] else {}
    summary[name] = {"status": status, "results": [x for x in lines[:-1] if "check" in x or "phase" in x]}
(out / "summary.json").write_text(json.dumps(summary, indent=1))
for name, s in summary.items():
    print(name, json.dumps(s["status"]))
EOF
exit $status
