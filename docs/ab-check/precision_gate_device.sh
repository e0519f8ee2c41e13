#!/usr/bin/env bash
# One device command on a two-GPU machine: the precision self-check in PROCESSES processes (default 4)
# on GPU 0 while GPU 1 runs the whole suite against the committed baseline (the gate a CI run makes).
set -uo pipefail
. docs/ab-check/setup.sh
(
  for i in $(seq "${PROCESSES:-4}"); do
    CUDA_VISIBLE_DEVICES=0 timeout 200 python -m pytest perf_tests/test_harness.py -m selfcheck --gpuperf -s -q -rs \
      -p no:randomly -k precision > "$OUT/precision-g0-$i.log" 2>&1
  done
) &
CUDA_VISIBLE_DEVICES=1 timeout "${SUITE_S:-450}" python -m pytest perf_tests --gpuperf --gpuperf-json="$OUT/suite-g1.json" \
  -q -p no:randomly > "$OUT/suite-g1.log" 2>&1 &
wait
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv
for f in "$OUT"/precision-g0-*.log; do echo "== $f"; grep -hE "precision method|runs:|SKIPPED|passed|failed|skipped" "$f"; done
echo "suite $(( $(date +%s) - S )) s"; grep -E "measured:|slow replay|passed|failed|FAILED" "$OUT/suite-g1.log" | tail -6
