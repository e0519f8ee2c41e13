#!/usr/bin/env bash
# One device command on a two-GPU machine: the accuracy self-check alone, after the side-stream check,
# and after every other harness check but that one, each in its own process.
set -uo pipefail
. docs/ab-check/setup.sh
sc() { CUDA_VISIBLE_DEVICES=$1 timeout 200 python -m pytest perf_tests/test_harness.py -m selfcheck --gpuperf -s -q \
  -p no:randomly -k "$2" > "$OUT/$3.log" 2>&1; }
sc 0 "accuracy" alone & sc 1 "another_stream or accuracy" side &
wait
sc 0 "not precision and not another_stream" others & sc 1 "accuracy" alone2 &
wait
for f in alone side others alone2; do echo "== $f"; grep -hE "^  accuracy|passed|failed" "$OUT/$f.log" | sed -E 's/do_bench.*profiled repeat/... repeat/'; done
echo "$(( $(date +%s) - S )) s"
