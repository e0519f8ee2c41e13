#!/usr/bin/env bash
# One device command on a two-GPU machine: the tests the power cap held down on an H100
# (capped_tests.txt), against the committed baseline, to record them: with HALF=1 each GPU runs half
# of them (one recording each in half the time), else both run all.
set -uo pipefail
. docs/ab-check/setup.sh
for g in 0 1; do
  tests=$(if [ "${HALF:-0}" = 1 ]; then awk -v g=$g 'NR % 2 == g' docs/ab-check/capped_tests.txt; else cat docs/ab-check/capped_tests.txt; fi)
  CUDA_VISIBLE_DEVICES=$g timeout "${SUITE_S:-240}" python -m pytest $tests --gpuperf \
    --gpuperf-json="$OUT/capped-g$g.json" -q -p no:randomly > "$OUT/capped-g$g.log" 2>&1 &
done
wait
for g in 0 1; do
  echo "gpu $g $(( $(date +%s) - S )) s"; grep -E "measured:|passed|failed|FAILED" "$OUT/capped-g$g.log" | tail -4
done
