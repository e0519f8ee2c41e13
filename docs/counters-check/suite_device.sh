#!/usr/bin/env bash
# Device script: the bundled suite's counters, one counting process per test file (what
# `--gpuperf-counters` runs before timing), then elementwise and softmax counted again in a second
# process: the baseline's counters, what counting costs, and how far unchanged code's counts move.
set -o pipefail
python -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export PYTHONUNBUFFERED=1
start=$(date +%s)
for f in elementwise softmax matmul attention; do
  left=$(( ${BUDGET:-540} - ($(date +%s) - start) ))
  [ $left -gt 30 ] || break
  timeout $left python docs/counters-check/count_suite.py $OUT/$f.json perf_tests/test_$f.py 2>&1 | tail -2
done
left=$(( ${BUDGET:-540} - ($(date +%s) - start) ))
[ $left -gt 40 ] && timeout $left python docs/counters-check/count_suite.py $OUT/again.json \
  perf_tests/test_elementwise.py perf_tests/test_softmax.py 2>&1 | tail -2
echo "total $(( $(date +%s) - start )) s"
