#!/usr/bin/env bash
# One device command on a two-GPU machine: the whole suite against the committed baselines (the gate a
# CI run makes) on each GPU at once, one pytest process per GPU. PRECISION=N first runs the precision
# self-check in N processes on GPU 0.
set -uo pipefail
. docs/ab-check/setup.sh
for g in 0 1; do
  (
    if [ "$g" = 0 ]; then
      for i in $(seq "${PRECISION:-0}"); do
        CUDA_VISIBLE_DEVICES=0 timeout 200 python -m pytest perf_tests/test_harness.py -m selfcheck --gpuperf -s -q \
          -p no:randomly -k precision > "$OUT/precision$i.log" 2>&1
      done
    fi
    CUDA_VISIBLE_DEVICES=$g timeout "${SUITE_S:-480}" python -m pytest perf_tests --gpuperf --gpuperf-json="$OUT/suite-g$g.json" \
      -q -p no:randomly > "$OUT/suite-g$g.log" 2>&1
  ) &
done
wait
grep -hE "precision method|runs:|passed|failed" "$OUT"/precision*.log 2>/dev/null
for g in 0 1; do
  echo "gpu $g $(( $(date +%s) - S )) s"; grep -E "measured:|passed|failed|FAILED" "$OUT/suite-g$g.log" | tail -5
done
