#!/usr/bin/env bash
# Device script (a two-GPU host): the bundled suite counted in two processes at once, one per GPU,
# one counting process per test file as `--gpuperf-counters` runs it: the baseline's counters and
# how far unchanged code's counts move between processes (compare_counts.py).
set -o pipefail
python -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
export PYTHONUNBUFFERED=1
start=$(date +%s)
for gpu in 0 1; do
  (
    mkdir -p $OUT/gpu$gpu
    for f in ${FILES:-elementwise softmax matmul attention}; do
      left=$(( ${BUDGET:-540} - ($(date +%s) - start) ))
      [ $left -gt 30 ] || break
      CUDA_VISIBLE_DEVICES=$gpu timeout $left python docs/counters-check/count_suite.py $OUT/gpu$gpu/$f.json \
        perf_tests/test_$f.py > $OUT/gpu$gpu/$f.log 2>&1
      echo "gpu $gpu $f: $(tail -1 $OUT/gpu$gpu/$f.log) at $(( $(date +%s) - start )) s"
    done
  ) &
done
wait
python docs/counters-check/compare_counts.py $OUT/gpu0/*.json -- $OUT/gpu1/*.json
echo "total $(( $(date +%s) - start )) s"
