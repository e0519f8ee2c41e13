#!/usr/bin/env bash
# Where a pytest process's time goes when every cache is warm (what each A/B round pays): the smoke
# subset under cProfile ($OUT/cost-*.prof, read with pstats), with and without the suite's Triton
# precompile step. Run after a suite run on the same machine.
set -uo pipefail
. docs/ab-check/setup.sh
for pre in 1 0; do
  s=$(date +%s%N)
  KERNELS_PRECOMPILE=$pre timeout 150 python -m cProfile -o "$OUT/cost-pre$pre.prof" -m pytest perf_tests -m smoke \
    --gpuperf --gpuperf-no-compare --gpuperf-json="$OUT/cost-pre$pre.json" -q -p no:randomly > "$OUT/cost-pre$pre.log" 2>&1
  echo "precompile=$pre rc=$? $(( ($(date +%s%N) - s) / 1000000 )) ms"; tail -2 "$OUT/cost-pre$pre.log"
done
