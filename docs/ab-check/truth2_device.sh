#!/usr/bin/env bash
# One device command on a two-GPU machine: the steady-state self-check on GPU 0 and the precision
# self-check on GPU 1, at once (one pytest process per GPU).
set -uo pipefail
. docs/ab-check/setup.sh
CUDA_VISIBLE_DEVICES=0 timeout 200 python -m pytest perf_tests/test_steady_state.py -m selfcheck --gpuperf -s -q -p no:randomly > "$OUT/steady.log" 2>&1 &
CUDA_VISIBLE_DEVICES=1 timeout 300 python -m pytest perf_tests/test_harness.py -m selfcheck --gpuperf -s -q -p no:randomly -k precision > "$OUT/precision.log" 2>&1 &
wait
echo "$(( $(date +%s) - S )) s"; grep -E "passed|failed" "$OUT/steady.log" | tail -2
grep -E "precision|passed|failed|MHz" "$OUT/precision.log" | tail -12
