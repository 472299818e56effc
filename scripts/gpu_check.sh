#!/usr/bin/env bash
# The prepared check for a machine with an NVIDIA GPU (a lent GPU has minutes, not hours):
#
#   1. the device kernels at GPU sizes on CUDA against torch (cuBLAS / cuDNN, TF32 off), each
#      with the performance model's prediction for the GPU there and measured/model
#      (benchmarks/device_kernels.py --targets cuda --size gpu);
#   2. the CUDA tests (pytest -k cuda: compile checks and the executed CUDA tests).
#
# Everything goes to $OUT (default ./gpu-check): environment.txt, device_kernels.md/.json,
# cuda_tests.txt/.xml, summary.json. Without an NVIDIA GPU it says so, writes summary.json
# with the reason and exits 0 having run nothing.
#
#   OUT=/tmp/out scripts/gpu_check.sh            # about 8 minutes at most
#   GPU_CHECK_BENCH_S=300 GPU_CHECK_TESTS_S=180  # the steps' time limits (seconds)
#   EINC_PYTHON=/path/to/python                  # default: .venv/bin/python, else python3
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu-check}"
mkdir -p "$OUT"
PY="${EINC_PYTHON:-}"
if [ -z "$PY" ]; then
  if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
BENCH_S="${GPU_CHECK_BENCH_S:-300}"
TESTS_S="${GPU_CHECK_TESTS_S:-180}"
START=$(date +%s)

summary() {  # summary.json: gpu, reason, each step's exit status
  "$PY" - "$OUT" "$@" <<'EOF' 2>/dev/null || printf '{"gpu": null, "reason": "%s"}\n' "$3" > "$1/summary.json"
import json, sys
out, gpu, reason, *steps = sys.argv[1:]
data = {"gpu": gpu or None, "reason": reason, "steps": dict(s.split("=", 1) for s in steps)}
path = out + "/device_kernels.json"
try:
    rows = json.load(open(path))
    ratios = [r["ms"] / r["here_ms"] for r in rows if r.get("ms") and r.get("here_ms")]
    data["model_within_2x"] = f"{sum(0.5 <= x <= 2 for x in ratios)} of {len(ratios)}"
except (OSError, ValueError, KeyError):
    pass
json.dump(data, open(out + "/summary.json", "w"), indent=1)
print(json.dumps(data))
EOF
}

# ---- is there an NVIDIA GPU? ------------------------------------------------------------------
GPU=""
if command -v nvidia-smi >/dev/null 2>&1; then
  GPU="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)"
fi
if [ -z "$GPU" ]; then
  echo "gpu_check: no NVIDIA GPU found (nvidia-smi absent or lists no GPU): nothing measured" >&2
  summary "" "no NVIDIA GPU found (nvidia-smi absent or lists no GPU)"
  exit 0
fi
if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  echo "gpu_check: nvidia-smi lists '$GPU' but torch (via $PY) sees no CUDA device: nothing measured" >&2
  summary "$GPU" "torch sees no CUDA device (a CPU-only torch, or no driver for it)"
  exit 0
fi
{
  date -u +"%Y-%m-%d %H:%M UTC"
  git rev-parse --short HEAD 2>/dev/null
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv 2>/dev/null
  "$PY" -c "import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda)"
  uptime
} > "$OUT/environment.txt" 2>&1
cat "$OUT/environment.txt"

# ---- 1. device kernels at GPU sizes against torch, with the model's prediction ----------------
echo "gpu_check: device kernels on $GPU (limit ${BENCH_S} s)" >&2
timeout "$BENCH_S" "$PY" benchmarks/device_kernels.py --targets cuda --size gpu \
  --json "$OUT/device_kernels.json" --markdown > "$OUT/device_kernels.md" 2> "$OUT/device_kernels.err"
BENCH=$?
tail -n 25 "$OUT/device_kernels.md"

# ---- 2. the CUDA tests, in the time left --------------------------------------------------------
LEFT=$(( 480 - ($(date +%s) - START) ))
[ "$LEFT" -lt "$TESTS_S" ] && TESTS_S=$LEFT
if [ "$TESTS_S" -gt 30 ]; then
  echo "gpu_check: CUDA tests (limit ${TESTS_S} s)" >&2
  PARALLEL=""
  "$PY" -c "import xdist" 2>/dev/null && PARALLEL="-n 8"
  timeout "$TESTS_S" "$PY" -m pytest $PARALLEL -k cuda tests/ -q -p no:cacheprovider \
    --junitxml="$OUT/cuda_tests.xml" > "$OUT/cuda_tests.txt" 2>&1
  TESTS=$?
  tail -n 5 "$OUT/cuda_tests.txt"
else
  TESTS="not run: no time left"
fi
summary "$GPU" "measured" "device_kernels=$BENCH" "cuda_tests=$TESTS"
exit 0
