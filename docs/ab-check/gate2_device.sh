#!/usr/bin/env bash
# One device command on a two-GPU machine: the whole suite against the committed baselines (the gate a
# CI run makes) on each GPU at once, one pytest process per GPU.
set -uo pipefail
. docs/ab-check/setup.sh
for g in 0 1; do
  CUDA_VISIBLE_DEVICES=$g timeout "${SUITE_S:-480}" python -m pytest perf_tests --gpuperf --gpuperf-json="$OUT/suite-g$g.json" \
    -q -p no:randomly > "$OUT/suite-g$g.log" 2>&1 &
done
wait
for g in 0 1; do
  echo "gpu $g $(( $(date +%s) - S )) s"; grep -E "measured:|passed|failed|FAILED" "$OUT/suite-g$g.log" | tail -5
done
