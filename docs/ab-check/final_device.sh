#!/usr/bin/env bash
# One device command: the smoke subset on a fresh machine, the whole suite against the committed
# baselines, then gpuperf ab with two tests in three slowed (docs/ab-check/slowdown_conftest.py).
set -uo pipefail
python -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,power.limit,temperature.gpu --format=csv > "$OUT/gpu.txt"
S=$(date +%s)
timeout 100 python -m pytest perf_tests -m smoke --gpuperf -q -p no:randomly > "$OUT/smoke.log" 2>&1
echo "smoke rc=$? $(( $(date +%s) - S )) s"
S2=$(date +%s)
timeout 380 python -m pytest perf_tests --gpuperf --gpuperf-json="$OUT/suite.json" -q -p no:randomly > "$OUT/suite.log" 2>&1
echo "suite rc=$? $(( $(date +%s) - S2 )) s"
REM=$(( 585 - ($(date +%s) - S) ))
echo "ab budget $REM s"
K='(triton and bfloat16 and (16384x16384 or 4096x4096 or 64x64 or 1000x1001 or 1x1048583 or B4H16N4096D64 or B4H16N4096D128 or B1H2N128D64 or B2H8N1000D128)) or (torch_manual and B4H16N4096D64) or (torch and bfloat16 and 8192x8192x8192)'
S3=$(date +%s)
timeout "$REM" bash docs/ab-check/ab_device.sh slow -q -p no:randomly -k "$K" > "$OUT/ab.log" 2>&1
echo "ab rc=$? $(( $(date +%s) - S3 )) s"
grep -E "measured|gpuperf:.*since start|passed|failed" "$OUT/smoke.log" "$OUT/suite.log" | tail -8
grep -E "^gpuperf ab|tests:" "$OUT/ab.log" | tail -12
